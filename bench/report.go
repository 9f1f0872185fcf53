package bench

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// Kinds of rig scenarios.
const (
	KindCeiling   = "ceiling"   // generator straight into the sink
	KindKernel    = "kernel"    // Linux forwarding, nftables
	KindForwarder = "forwarder" // bare AF_XDP forwarder
	KindVIPD      = "vipd"
)

// Env says where and how a report was made.
type Env struct {
	Date, Kernel, CPU, GoVersion, Commit, Command string
	CPUs                                          int
	LoadBefore, LoadAfter                         string // /proc/loadavg
	Notes                                         []string
}

// RigResult is one scenario of the on-interface rig. Rates are per second.
type RigResult struct {
	Name   string // row label
	Kind   string
	Mode   string // vipd: "nat" or "dsr"
	IO     string // "afxdp" or "afpacket" (vipd and forwarder)
	Queues int

	Forwarded Summary // packets counted at the sink
	Offered   Summary // packets the generator put on its wire
	// VethDrops: frames the veth pair dropped on the way into the box
	// (the generator side's tx_dropped plus the box side's rx_dropped).
	// SockDrops: frames the box's socket dropped: AF_XDP rx ring full or
	// no fill-ring frame, AF_PACKET ring full.
	VethDrops, SockDrops Summary
	CPUBusy              []float64 // per CPU, 0..1, median over repetitions
	QueueShare           []float64 // per receive queue, share of frames
	Extra                map[string]float64
	Err                  string
}

// Section is a titled block of preformatted text (profiles, counters).
type Section struct {
	Title, Intro, Text string
}

// Report is everything `make bench` writes.
type Report struct {
	Env Env
	// Box is the box-limited table (the headline), Rig the sender-limited
	// one.
	Box      []BoxResult
	Rig      []RigResult
	InMem    []GoBench
	Findings []string
	Sections []Section
}

// Goals from the issue, reported against, never asserted.
const (
	GoalVsNFT       = 1.2  // vipd ≥ 1.2× nftables DNAT
	GoalVsForwarder = 0.9  // vipd ≥ 90% of the bare AF_XDP forwarder
	GoalHitNs       = 50.0 // pipeline ≤ 50 ns/packet, conntrack hit
)

// Find returns the first result of kind with the given queue count (0 =
// any), or nil.
func (r *Report) Find(kind, name string, queues int) *RigResult {
	for i := range r.Rig {
		x := &r.Rig[i]
		if x.Kind == kind && (name == "" || x.Name == name) && (queues == 0 || x.Queues == queues) && x.Err == "" {
			return x
		}
	}
	return nil
}

// NFT is the nftables DNAT result, Ceiling the rig's ceiling.
func (r *Report) NFT() *RigResult     { return r.Find(KindKernel, NameNFT, 0) }
func (r *Report) Ceiling() *RigResult { return r.Find(KindCeiling, "", 0) }

// NameNFT is the row name of the nftables scenario.
const NameNFT = "nftables DNAT (jhash, 3 backends)"

// Ratios returns a vipd row's median over nftables', the ceiling's and
// the bare forwarder's with the same queue count (NaN where missing).
func (r *Report) Ratios(x *RigResult) (nft, ceil, fwd float64) {
	nft, ceil, fwd = math.NaN(), math.NaN(), math.NaN()
	if n := r.NFT(); n != nil {
		nft = Ratio(x.Forwarded.Median, n.Forwarded.Median)
	}
	if c := r.Ceiling(); c != nil {
		ceil = Ratio(x.Forwarded.Median, c.Forwarded.Median)
	}
	if f := r.Find(KindForwarder, "", x.Queues); f != nil {
		fwd = Ratio(x.Forwarded.Median, f.Forwarded.Median)
	}
	return
}

// Mpps formats packets per second in millions, 3 decimals.
func Mpps(pps float64) string {
	if math.IsNaN(pps) {
		return "–"
	}
	return fmt.Sprintf("%.3f", pps/1e6)
}

func kpps(s Summary) string {
	if s.N == 0 {
		return "–"
	}
	if s.Max < 0.5 {
		return "0"
	}
	return fmt.Sprintf("%.0f", s.Median/1e3)
}

func ratio(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.2f×", x)
}

func pct(x float64) string { return fmt.Sprintf("%.0f%%", 100*x) }

// WriteRigTable writes the on-interface table in Markdown.
func (r *Report) WriteRigTable(w io.Writer) {
	fmt.Fprintln(w, "| scenario | forwarded Mpps, median (min–max) | offered Mpps | veth drops kpps | socket drops kpps | CPU busy (cpu0/cpu1) | limited by | vs nftables | vs ceiling | vs bare AF_XDP fwd |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
	for i := range r.Rig {
		x := &r.Rig[i]
		if x.Err != "" {
			fmt.Fprintf(w, "| %s | failed: %s | | | | | | | | |\n", x.Name, oneLine(x.Err))
			continue
		}
		var cpus []string
		for _, c := range x.CPUBusy {
			cpus = append(cpus, pct(c))
		}
		vsNFT, vsCeil, vsFwd := "", "", ""
		if x.Kind == KindVIPD || x.Kind == KindForwarder {
			n, c, f := r.Ratios(x)
			vsNFT, vsCeil = ratio(n), ratio(c)
			if x.Kind == KindVIPD {
				vsFwd = ratio(f)
			}
		}
		if x.Kind == KindKernel {
			_, c, _ := r.Ratios(x)
			vsCeil = ratio(c)
		}
		fmt.Fprintf(w, "| %s | **%s** (%s–%s) | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			x.Name, Mpps(x.Forwarded.Median), Mpps(x.Forwarded.Min), Mpps(x.Forwarded.Max),
			Mpps(x.Offered.Median), kpps(x.VethDrops), kpps(x.SockDrops), strings.Join(cpus, "/"),
			r.Limit(x), vsNFT, vsCeil, vsFwd)
	}
}

// Limit says what held a row back: the box, when it dropped more than 2%
// of what was offered (an overloaded box drops); otherwise the sending
// side, whose offered rate then fell below the ceiling's (a path that
// costs the sender's CPU slows the generator down instead of dropping).
func (r *Report) Limit(x *RigResult) string {
	if x.Kind == KindCeiling {
		return "generator CPU"
	}
	if r.boxLimited(x) {
		return fmt.Sprintf("box: drops %s of offered", pct((x.VethDrops.Median+x.SockDrops.Median)/x.Offered.Median))
	}
	if c := r.Ceiling(); c != nil && c.Offered.Median > 0 {
		return fmt.Sprintf("sender CPU: offered %s of ceiling", pct(x.Offered.Median/c.Offered.Median))
	}
	return "sender CPU"
}

// boxLimited reports whether the box dropped more than 2% of the offer.
func (r *Report) boxLimited(x *RigResult) bool {
	drops := x.VethDrops.Median + x.SockDrops.Median
	return x.Offered.Median > 0 && drops > 0.02*x.Offered.Median
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

// GoalLines compares each vipd row with the goals.
func (r *Report) GoalLines() []string {
	var out []string
	for i := range r.Rig {
		x := &r.Rig[i]
		if x.Kind != KindVIPD || x.Err != "" {
			continue
		}
		n, _, f := r.Ratios(x)
		l := fmt.Sprintf("%s: %s nftables (goal ≥ %.1f×: %s), %s of the bare forwarder (goal ≥ %.0f%%: %s)",
			x.Name, ratio(n), GoalVsNFT, met(n >= GoalVsNFT), pctOrDash(f), 100*GoalVsForwarder, met(f >= GoalVsForwarder))
		if fw := r.Find(KindForwarder, "", x.Queues); fw != nil && !r.boxLimited(x) && !r.boxLimited(fw) {
			l += "; neither dropped: both rates are what the sending CPU had left after the box's receive work"
		}
		out = append(out, l)
	}
	return out
}

// InMemGoalLines compares the pipeline's conntrack-hit cost with its goal.
func (r *Report) InMemGoalLines() []string {
	var out []string
	for _, b := range r.InMem {
		if strings.HasPrefix(b.Name, "Pipeline/") && strings.Contains(b.Name, "/hit/flows=1/64B") {
			ns := b.Metrics["ns/pkt"]
			out = append(out, fmt.Sprintf("in memory, %s: %.1f ns/packet (goal ≤ %.0f ns: %s)", b.Name, ns, GoalHitNs, met(ns <= GoalHitNs)))
		}
	}
	return out
}

func pctOrDash(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return pct(x)
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

func (r *Report) hasBoxCounters() bool {
	for i := range r.Rig {
		if len(r.Rig[i].Extra) > 0 {
			return true
		}
	}
	return false
}

// WriteCountersTable writes, for the rows run by a program of ours (the
// forwarder and vipd), what that program counted: frames per receive
// batch, transmit wakeups (sendto) per batch, fill-ring starvation, the
// split of frames over the queues, live flows and pipeline drops. With one
// queue the program is alone on CPU 1, with the transmit path and the
// sink's receive that run in its context, so CPU 1's busy time per
// forwarded packet is the box's cost per packet on that side, whatever
// limited the rate.
func (r *Report) WriteCountersTable(w io.Writer) {
	fmt.Fprintln(w, "| scenario | CPU 1 ns per packet | frames per batch | sendto per batch | fill ring empty /s | frames per queue | flows tracked | pipeline drops /s | trafgen restarts |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
	for i := range r.Rig {
		x := &r.Rig[i]
		if len(x.Extra) == 0 || x.Err != "" {
			continue
		}
		var share []string
		for _, q := range x.QueueShare {
			share = append(share, pct(q))
		}
		split := "–"
		if len(share) > 0 {
			split = strings.Join(share, " / ")
		}
		perPkt := "–"
		if x.Queues == 1 && len(x.CPUBusy) > 1 && x.Forwarded.Median > 0 {
			perPkt = fmt.Sprintf("%.0f", x.CPUBusy[1]*1e9/x.Forwarded.Median)
		}
		restarts := "0"
		if v, ok := x.Extra["trafgen restarts"]; ok {
			restarts = fmt.Sprintf("%.0f", v)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", x.Name, perPkt, num(x.Extra, "frames per batch", "%.1f"),
			num(x.Extra, "sendto per batch", "%.2f"), num(x.Extra, "fill ring empty /s", "%.0f"), split,
			num(x.Extra, "flows tracked", "%.0f"), num(x.Extra, "pipeline drops /s", "%.0f"), restarts)
	}
}

func num(m map[string]float64, k, format string) string {
	v, ok := m[k]
	if !ok || math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf(format, v)
}

// WriteInMemTable writes the Go benchmarks in Markdown: the pipeline with
// ns/packet and packets per second, the rest with ns/op.
func (r *Report) WriteInMemTable(w io.Writer) {
	fmt.Fprintln(w, "| benchmark | ns/packet (ns/op) | packets/s | allocs/op | other |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | --- |")
	for _, b := range r.InMem {
		ns, ok := b.Metrics["ns/pkt"]
		if !ok {
			ns = b.Metrics["ns/op"]
		}
		pps := "–"
		if v, ok := b.Metrics["pkt/s"]; ok {
			pps = fmt.Sprintf("%.2fM", v/1e6)
		} else if v, ok := b.Metrics["lookups/s"]; ok {
			pps = fmt.Sprintf("%.2fM lookups", v/1e6)
		}
		allocs := "–"
		if v, ok := b.Metrics["allocs/op"]; ok {
			allocs = fmt.Sprintf("%g", v)
		}
		var other []string
		for _, u := range sortedUnits(b.Metrics) {
			switch u {
			case "ns/op", "ns/pkt", "pkt/s", "allocs/op", "lookups/s", "MB/s", "B/op":
				continue
			}
			other = append(other, fmt.Sprintf("%.4g %s", b.Metrics[u], u))
		}
		fmt.Fprintf(w, "| %s %s | %.1f | %s | %s | %s |\n", shortPkg(b.Pkg), b.Name, ns, pps, allocs, strings.Join(other, ", "))
	}
}

func shortPkg(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

func sortedUnits(m map[string]float64) []string {
	var us []string
	for u := range m {
		us = append(us, u)
	}
	sort.Strings(us)
	return us
}

// WriteMarkdown writes the whole report.
func (r *Report) WriteMarkdown(w io.Writer, chart string) {
	e := &r.Env
	fmt.Fprintf(w, "# vipd benchmark report\n\n")
	fmt.Fprintf(w, "- date: %s\n- kernel: %s\n- CPU: %s (%d CPUs)\n- Go: %s\n- vipd commit: %s\n- command: `%s`\n- load average before / after: %s / %s\n",
		e.Date, e.Kernel, e.CPU, e.CPUs, e.GoVersion, e.Commit, e.Command, e.LoadBefore, e.LoadAfter)
	for _, n := range e.Notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
	if len(r.Box) > 0 {
		fmt.Fprintf(w, "\n## On interfaces, box-limited: what one box CPU forwards\n\n")
		fmt.Fprintf(w, "%s\n\n", BoxTableIntro)
		r.WriteBoxTable(w)
		if g := r.BoxGoalLines(); len(g) > 0 {
			fmt.Fprintf(w, "\n### Against the goals\n\n")
			for _, l := range g {
				fmt.Fprintf(w, "- %s\n", l)
			}
		}
	}
	if len(r.Rig) > 0 {
		fmt.Fprintf(w, "\n## On interfaces, sender-limited: box receive work on the generator's CPU\n\n")
		fmt.Fprintf(w, "%s\n\n", RigTableIntro)
		r.WriteRigTable(w)
		if chart != "" {
			fmt.Fprintf(w, "\n![median forwarded packets per second, min–max whiskers](%s)\n", chart)
		}
		if g := append(r.GoalLines(), r.InMemGoalLines()...); len(g) > 0 {
			fmt.Fprintf(w, "\n### Against the goals of the sender-limited table\n\n")
			for _, l := range g {
				fmt.Fprintf(w, "- %s\n", l)
			}
		}
	}
	if r.hasBoxCounters() {
		fmt.Fprintf(w, "\n### The box's own counters (medians over the windows)\n\n")
		r.WriteCountersTable(w)
	}
	if len(r.Findings) > 0 {
		fmt.Fprintf(w, "\n## What the counters say\n\n")
		for _, f := range r.Findings {
			fmt.Fprintf(w, "- %s\n", f)
		}
	}
	for _, s := range r.Sections {
		fmt.Fprintf(w, "\n## %s\n\n", s.Title)
		if s.Intro != "" {
			fmt.Fprintf(w, "%s\n\n", s.Intro)
		}
		fmt.Fprintf(w, "```\n%s\n```\n", strings.TrimRight(s.Text, "\n"))
	}
	if len(r.InMem) > 0 {
		fmt.Fprintf(w, "\n## In memory: one worker, one core\n\n")
		r.WriteInMemTable(w)
	}
}
