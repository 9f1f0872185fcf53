package bench

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// BoxResult is one row of the box-limited table: the box's receive work
// (NAPI) threaded and pinned to the box's CPU with the box program, the
// generator alone on the other CPU offering more than the box can take.
// Rates are per second, CPU figures medians over the windows.
type BoxResult struct {
	Name  string
	Kind  string // KindKernel, KindForwarder or KindVIPD
	Mode  string // vipd: "nat" or "dsr"; kernel: "nft"
	IO    string // "afxdp" or "afpacket"
	Flows int
	// Procs is the GOMAXPROCS the row set for the box's program; 0: the
	// program's default (one P besides the workers). A vipd row is
	// compared with the forwarder's row of the same Procs.
	Procs int `json:",omitempty"`
	// FrameSize is the frame size the row set for the box's program
	// (vipd's frame_size, the forwarder's -frame-size); 0: the default,
	// by the interfaces' MTUs. A vipd row is compared with the
	// forwarder's row of the same Procs and FrameSize.
	FrameSize int `json:",omitempty"`
	// BatchSize is the batch size the row set for the box's program
	// (vipd's batch_size, the forwarder's -batch); 0: both programs'
	// default. A vipd row is compared with the forwarder's row of the
	// same Procs, FrameSize and BatchSize.
	BatchSize int `json:",omitempty"`

	Forwarded Summary // packets counted at the sink
	Offered   Summary // packets the generator handed to its veth
	// Lost: offered − forwarded, every frame the box (its receive ring,
	// socket, program or transmit) did not deliver. The others say where,
	// as far as counters tell: RingDrops, frames the box's veth receive
	// ring had no room for (the generator veth's tx_dropped: the NAPI
	// kthread fell behind); RxDrops, frames dropped in the box's receive
	// path (its veth's rx_dropped: XDP drops and redirect failures, such
	// as into a full AF_XDP ring); SockDrops, what the box program's
	// sockets counted (may overlap RxDrops).
	Lost, RingDrops, RxDrops, SockDrops Summary

	// CPU is the box CPU's time split from /proc/stat (shares, 0..1).
	// Others: the share of the box CPU's busy time charged to neither
	// the box process nor the NAPI kthreads — other tasks (this machine
	// is shared), and softirq work that interrupted the idle task.
	CPU    CPUSplit
	Others float64
	// UserNs and SysNs: the box process's user and system CPU time
	// (/proc/PID/stat utime, stime) per forwarded packet; NAPINs: the
	// receive NAPI kthreads' CPU time per forwarded packet; BusyNs: the
	// box CPU's busy time per forwarded packet. NaN where there is no
	// such process.
	UserNs, SysNs, NAPINs, BusyNs float64
	// FramesPerBatch: vipd's vipd_worker_batch_size sum/count, the
	// forwarder's frames over its batches; NaN for the kernel.
	FramesPerBatch float64
	// WorkerShare: frames vipd's workers took per packet forwarded (its
	// batch-size histogram's sum over the sink's count): near 1 without
	// the XDP fast path; with it, the flows' first packets and each
	// entry's renewal once per fast_path_refresh. NaN but for vipd.
	WorkerShare float64
	NAPIThreads int // receive NAPI kthreads found and pinned
	Restarts    int // trafgen restarts
	// Rounds holds, when the table ran in rounds (every row once per
	// round, in turn), each round's medians, NaN for a round that failed;
	// the row's other figures pool the windows of all rounds. BoxRatios
	// pairs a vipd row's rounds with the forwarder's.
	Rounds []BoxRound `json:",omitempty"`
	Err    string
}

// BoxRound is one round of a box-limited row: its medians over that
// round's windows.
type BoxRound struct {
	Forwarded float64 // packets per second at the sink
	UserNs    float64 // box process user CPU per forwarded packet
}

// CPUSplit is where one CPU's time went, as shares of its total.
type CPUSplit struct {
	User, Sys, IRQ, SoftIRQ, Steal, Idle float64
}

// Busy is every share but idle.
func (c CPUSplit) Busy() float64 { return c.User + c.Sys + c.IRQ + c.SoftIRQ + c.Steal }

// LossThreshold is the share of the offer a box must lose for its row to
// count as box-limited; below it the generator is the limit.
const LossThreshold = 0.01

// BoxLimited reports whether the box lost more than LossThreshold of what
// was offered: an overloaded box drops, and only then is the forwarded
// rate the box's capacity.
func (x *BoxResult) BoxLimited() bool {
	return x.Offered.Median > 0 && x.Lost.Median > LossThreshold*x.Offered.Median
}

// Limit says what held the row back.
func (x *BoxResult) Limit() string {
	if x.Offered.Median <= 0 {
		return "nothing offered"
	}
	share := x.Lost.Median / x.Offered.Median
	if x.BoxLimited() {
		return fmt.Sprintf("box: lost %s of offered", pct1(share))
	}
	return fmt.Sprintf("generator-limited (box lost %s)", pct1(max(share, 0)))
}

// NsPerPacket is CPU time in clock ticks (USER_HZ, 100 per second on
// Linux) spent per packet, in nanoseconds; NaN without packets.
func NsPerPacket(ticks, packets float64) float64 {
	if packets <= 0 || math.IsNaN(ticks) {
		return math.NaN()
	}
	return ticks / ClockTicks * 1e9 / packets
}

// ClockTicks is USER_HZ, the unit of /proc/stat and /proc/PID/stat times.
const ClockTicks = 100

// findBox returns the box-limited row of kind with flows flows and
// GOMAXPROCS procs (BoxResult.Procs), or nil.
func (r *Report) findBox(kind string, like *BoxResult) *BoxResult {
	for i := range r.Box {
		x := &r.Box[i]
		if x.Kind == kind && x.Flows == like.Flows && x.Procs == like.Procs && x.FrameSize == like.FrameSize && x.BatchSize == like.BatchSize && x.Err == "" {
			return x
		}
	}
	return nil
}

// BoxRatios returns a row's forwarded rate and process user ns per packet
// over the bare forwarder's with the same flow count, GOMAXPROCS, frame
// size and batch size (NaN where missing): the medians of the per-round
// ratios when both rows ran in the same rounds (BoxRoundRatios), else the
// ratios of the rows' medians.
func (r *Report) BoxRatios(x *BoxResult) (pps, userNs float64) {
	f := r.findBox(KindForwarder, x)
	if f == nil {
		return math.NaN(), math.NaN()
	}
	if p, n := BoxRoundRatios(x, f); p.N > 0 {
		userNs = math.NaN()
		if n.N > 0 {
			userNs = n.Median
		}
		return p.Median, userNs
	}
	pps = Ratio(x.Forwarded.Median, f.Forwarded.Median)
	userNs = math.NaN()
	if !math.IsNaN(x.UserNs) && !math.IsNaN(f.UserNs) {
		userNs = Ratio(x.UserNs, f.UserNs)
	}
	return pps, userNs
}

// BoxRoundRatios summarizes, over the rounds both rows ran in (the same
// count, more than one), x's forwarded rate and user ns per packet over
// base's in the same round: a ratio of two rows measured seconds apart
// rather than minutes, which the drift of a shared machine moves less.
// Rounds where either figure is NaN are left out; N is 0 without rounds.
func BoxRoundRatios(x, base *BoxResult) (pps, userNs Summary) {
	if len(x.Rounds) < 2 || len(x.Rounds) != len(base.Rounds) {
		return Summary{}, Summary{}
	}
	var ps, ns []float64
	for i, a := range x.Rounds {
		b := base.Rounds[i]
		if r := Ratio(a.Forwarded, b.Forwarded); !math.IsNaN(r) {
			ps = append(ps, r)
		}
		if r := Ratio(a.UserNs, b.UserNs); !math.IsNaN(r) {
			ns = append(ns, r)
		}
	}
	return Summarize(ps), Summarize(ns)
}

func pct1(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", 100*x)
}

func nsOrDash(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.0f", x)
}

func flowsLabel(n int) string {
	if n >= 1000 {
		return fmt.Sprintf("%d,%03d", n/1000, n%1000)
	}
	return fmt.Sprintf("%d", n)
}

func flowsPhrase(n int) string {
	if n == 1 {
		return "1 flow"
	}
	return flowsLabel(n) + " flows"
}

// WriteBoxTable writes the box-limited table in Markdown.
func (r *Report) WriteBoxTable(w io.Writer) {
	fmt.Fprintln(w, "| box path | flows | forwarded kpps, median (min–max) | offered kpps | lost at box (ring full / rx path / socket, kpps) | limited by | box CPU user / sys / softirq / idle (not the box's) | box process user ns/pkt | box process sys ns/pkt | NAPI thread ns/pkt | box CPU busy ns/pkt | frames per batch | through workers | vs bare fwd: pps | vs bare fwd: user ns/pkt |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for i := range r.Box {
		x := &r.Box[i]
		if x.Err != "" {
			fmt.Fprintf(w, "| %s | %s | failed: %s | | | | | | | | | | | | |\n", x.Name, flowsLabel(x.Flows), oneLine(x.Err))
			continue
		}
		vsPPS, vsNs := "", ""
		if x.Kind == KindVIPD {
			vsPPS, vsNs = r.boxRatioCells(x)
		}
		fpb := "–"
		if !math.IsNaN(x.FramesPerBatch) {
			fpb = fmt.Sprintf("%.1f", x.FramesPerBatch)
		}
		c := x.CPU
		fmt.Fprintf(w, "| %s | %s | **%s** (%s–%s) | %s | %s (%s / %s / %s) | %s | %s / %s / %s / %s (%s) | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			x.Name, flowsLabel(x.Flows), kpps1(x.Forwarded.Median), kpps1(x.Forwarded.Min), kpps1(x.Forwarded.Max),
			kpps1(x.Offered.Median), pct1(Ratio(max(x.Lost.Median, 0), x.Offered.Median)), kpps(x.RingDrops), kpps(x.RxDrops), kpps(x.SockDrops),
			x.Limit(), pct(c.User), pct(c.Sys), pct(c.SoftIRQ), pct(c.Idle), pctOrDash(x.Others),
			nsOrDash(x.UserNs), nsOrDash(x.SysNs), nsOrDash(x.NAPINs), nsOrDash(x.BusyNs), fpb, pct1(x.WorkerShare), vsPPS, vsNs)
	}
}

// boxRatioCells formats a vipd row's ratios to the bare forwarder: with
// rounds, the median of the per-round ratios and their range.
func (r *Report) boxRatioCells(x *BoxResult) (pps, userNs string) {
	p, n := r.BoxRatios(x)
	pps, userNs = ratio(p), ratio(n)
	if f := r.findBox(KindForwarder, x); f != nil {
		if ps, ns := BoxRoundRatios(x, f); ps.N > 0 {
			pps, userNs = ratioRange(ps), ratioRange(ns)
		}
	}
	return pps, userNs
}

// ratioRange is a summary of ratios: the median, then min–max.
func ratioRange(s Summary) string {
	if s.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%s (%.2f–%.2f)", ratio(s.Median), s.Min, s.Max)
}

func kpps1(pps float64) string {
	if math.IsNaN(pps) {
		return "–"
	}
	return fmt.Sprintf("%.0f", pps/1e3)
}

// BoxGoalLines compares the vipd rows with the goals set for what vipd's
// pipeline may add to the cost of moving a packet through AF_XDP:
// forwarded rate ≥ GoalBoxVsForwarder × the bare forwarder's, user CPU
// per packet ≤ GoalBoxUserNs × the forwarder's. Reported, never asserted:
// on veth the rate moves by ±20% between rounds.
func (r *Report) BoxGoalLines() []string {
	var out []string
	for i := range r.Box {
		x := &r.Box[i]
		if x.Kind != KindVIPD || x.Err != "" || x.IO != "afxdp" {
			continue
		}
		p, n := r.BoxRatios(x)
		ps, ns := r.boxRatioCells(x)
		l := fmt.Sprintf("%s, %s: %s the bare forwarder's rate (goal ≥ %.2f×: %s), %s its user ns/packet (goal ≤ %.1f×: %s)",
			x.Name, flowsPhrase(x.Flows), ps, GoalBoxVsForwarder, met(p >= GoalBoxVsForwarder), ns, GoalBoxUserNs, met(n <= GoalBoxUserNs))
		var notes []string
		if !x.BoxLimited() {
			notes = append(notes, "vipd did not drop")
		}
		if f := r.findBox(KindForwarder, x); f != nil && !f.BoxLimited() {
			notes = append(notes, "the forwarder did not drop")
		}
		if len(notes) > 0 {
			l += "; " + strings.Join(notes, ", ") + ": the rate ratio is the generator's, not the box's"
		}
		out = append(out, l)
	}
	return out
}

// Goals for the box-limited rig: vipd on the box's one CPU should forward
// nearly what the bare AF_XDP forwarder does and spend little more user
// time per packet, so that the rig measures the pipeline, not the I/O.
const (
	GoalBoxVsForwarder = 0.97
	GoalBoxUserNs      = 1.5
)

// BoxTableIntro says what the box-limited table measures and what limits it.
const BoxTableIntro = "What limits this table: **the box's CPU**. One queue; the box's receive veth runs threaded NAPI " +
	"(its XDP program and AF_XDP copy, or the kernel's whole receive and forwarding path) in a kthread pinned to the box's CPU " +
	"together with the box's program (vipd or the bare forwarder), as a NIC's interrupts would on a gateway; the generator " +
	"(trafgen) is alone on the other CPU and offers more than the box can take. A row counts as box-limited when the box " +
	"lost more than 1% of the offer (offered − forwarded: receive ring, socket, program or transmit); otherwise it says " +
	"generator-limited. Where the box lost them, as far as counters tell: ring full (the veth's receive ring had no room: " +
	"the NAPI kthread fell behind), rx path (dropped by the box veth's receive path: XDP drops, redirect failures such as " +
	"into a full AF_XDP ring), socket (the box program's socket counters; may overlap rx path). Box CPU split: /proc/stat of the box CPU " +
	"(tick-sampled; the NAPI kthread shows as sys and softirq); in parentheses the share of it charged to neither the box " +
	"process nor the NAPI kthreads — other tasks on this shared machine. Process and NAPI ns/pkt: " +
	"/proc/PID/stat CPU time (10 ms ticks) per packet forwarded; the box's transmit into the sink's veth, and the sink's " +
	"receive, run on the box CPU too. Frames per batch: vipd's vipd_worker_batch_size histogram (sum/count), the " +
	"forwarder's own batch counter. Through workers: the frames vipd's workers took (that histogram's sum) per packet forwarded, " +
	"near 100% without the XDP fast path; with it, each flow's first packets and one per fast_path_refresh that renews its entry. Ratios are to the bare forwarder with the same flows, in the same run; when the table ran " +
	"in rounds (every row once per round, in turn), each round's ratio pairs the two rows' windows of that round, and a cell " +
	"gives the median over the rounds and, in parentheses, the lowest and highest."

// RigTableIntro says what the sender-limited table measures.
const RigTableIntro = "What limits this table: **the generator's CPU**. The box's receive work (its XDP program and AF_XDP " +
	"copy, or the kernel's whole forwarding path) runs in the softirq of the CPU that sends into the veth, the generator's: " +
	"this table measures the sender CPU each path leaves, not the box's capacity. Read the box-limited table for that."
