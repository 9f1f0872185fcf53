package rig

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/vipd/vipd/bench"
)

// Scenario is one row of the rig's table.
type Scenario struct {
	Name   string
	Kind   string // bench.Kind*
	Mode   string // vipd: "nat" or "dsr"; kernel: "fwd" or "nft"
	IO     string // vipd: "afxdp" or "afpacket"
	Queues int
	// Profile records a CPU profile of the whole machine (perf) during one
	// extra window after the measured ones.
	Profile bool
}

// Scenarios is the standard list, in the order of the report.
func Scenarios() []Scenario {
	s := []Scenario{
		{Name: "ceiling: generator → sink", Kind: bench.KindCeiling, Queues: 1},
		{Name: "Linux IP forwarding", Kind: bench.KindKernel, Mode: "fwd", Queues: 1},
		{Name: bench.NameNFT, Kind: bench.KindKernel, Mode: "nft", Queues: 1, Profile: true},
		{Name: "bare AF_XDP forwarder, 1 queue", Kind: bench.KindForwarder, IO: "afxdp", Queues: 1, Profile: true},
		{Name: "bare AF_XDP forwarder, 2 queues", Kind: bench.KindForwarder, IO: "afxdp", Queues: 2},
	}
	for _, mode := range []string{"nat", "dsr"} {
		for _, io := range []string{"afxdp", "afpacket"} {
			for _, q := range []int{1, 2} {
				s = append(s, Scenario{
					Name: fmt.Sprintf("vipd %s, %s, %d queue%s", map[string]string{"nat": "NAT", "dsr": "DSR"}[mode],
						map[string]string{"afxdp": "AF_XDP", "afpacket": "AF_PACKET"}[io], q, map[bool]string{true: "s"}[q > 1]),
					Kind: bench.KindVIPD, Mode: mode, IO: io, Queues: q,
					Profile: mode == "nat" && io == "afxdp" && q == 1,
				})
			}
		}
	}
	return s
}

// Options shape a run.
type Options struct {
	Window time.Duration // one measured window (default 5 s)
	Reps   int           // windows per scenario (default 3)
	Warmup time.Duration // generator running before each window (default 700 ms)
	VIPD   string        // vipd binary
	XDPFwd string        // bench/cmd/xdpfwd binary
	Dir    string        // scratch directory
	Log    io.Writer     // progress
	// GenCPUs and GenProcs place trafgen (default CPU 0, one process);
	// GenBypass keeps trafgen's qdisc bypass (then a single process sends
	// on one queue only).
	GenCPUs   string
	GenProcs  int
	GenBypass bool
	// BoxCPUs is where the box program runs, by queue count (default "1"
	// for one queue, "0-1" for more).
	BoxCPUs func(queues int) string
	// Threaded switches the box's receive interface to threaded NAPI.
	Threaded bool
	// Perf is the perf binary for profiles; "" skips them.
	Perf string
	// BoxNice is the nice value of the box-limited rows' box program and
	// NAPI kthreads (0: unchanged): on a shared machine it keeps other
	// tasks from taking the box's CPU, as none would on a gateway.
	BoxNice int
}

// Defaults fills in the zero fields.
func (o *Options) Defaults() {
	if o.Window <= 0 {
		o.Window = 5 * time.Second
	}
	if o.Reps <= 0 {
		o.Reps = 3
	}
	if o.Warmup <= 0 {
		o.Warmup = 700 * time.Millisecond
	}
	if o.GenCPUs == "" {
		o.GenCPUs = "0"
	}
	if o.GenProcs <= 0 {
		o.GenProcs = 1
	}
	if o.BoxCPUs == nil {
		o.BoxCPUs = func(q int) string {
			if q > 1 {
				return "0-1"
			}
			return "1"
		}
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
}

// sample is everything read at one instant.
type sample struct {
	at             time.Time
	gen, box, sink LinkStats // g0, eth0, s0
	boxc           BoxCounters
	cpu            CPUTimes
}

// Run builds the scenario's rig inside a child of parent, measures it and
// removes it. A failure is returned in the result's Err.
func Run(parent *Scope, sc Scenario, o Options) (bench.RigResult, *bench.Section) {
	o.Defaults()
	res := bench.RigResult{Name: sc.Name, Kind: sc.Kind, Mode: sc.Mode, IO: sc.IO, Queues: sc.Queues, Extra: map[string]float64{}}
	var prof *bench.Section
	s := parent.Child()
	defer s.Close()
	dir, err := os.MkdirTemp(o.Dir, "scenario")
	if err != nil {
		res.Err = err.Error()
		return res, nil
	}
	s.Cleanup(func() { os.RemoveAll(dir) })
	err = Try(func() {
		r := New(s, sc.Queues, sc.Kind == bench.KindCeiling)
		tr := Traffic{DstMAC: r.FirstHopMAC(), Dst: VIPNAT, DstPort: VIPPort}
		var box Box
		boxCPUs := o.BoxCPUs(sc.Queues)
		switch {
		case sc.Kind == bench.KindCeiling:
			tr.Dst, tr.DstPort = Backends[0], BackendPort
		case sc.Kind == bench.KindKernel && sc.Mode == "fwd":
			r.Box.Sysctl(s, "net.ipv4.ip_forward", "1")
			tr.Dst, tr.DstPort = Backends[0], BackendPort
		case sc.Kind == bench.KindKernel:
			SetupNFT(s, r, dir)
		case sc.Kind == bench.KindForwarder:
			r.Box.Sysctl(s, "net.ipv4.ip_forward", "0")
			box = StartForwarder(s, r, o.XDPFwd, Placement{CPUs: boxCPUs}, dir)
		case sc.Kind == bench.KindVIPD:
			// AF_PACKET mode requires it; AF_XDP mode does not care.
			r.Box.Sysctl(s, "net.ipv4.ip_forward", "0")
			// The workers forward every packet (no XDP fast path).
			box = StartVIPD(s, r, o.VIPD, Placement{CPUs: boxCPUs}, sc.IO, dir, `fast_path = "off"`)
			if sc.Mode == "dsr" {
				tr.Dst = VIPDSR
			}
		}
		if o.Threaded && r.Box != nil {
			Sysfs(s, r.Box, BoxIn, "threaded", "1")
		}
		gopts := GenOptions{CPUs: o.GenCPUs, Procs: o.GenProcs, Bypass: o.GenBypass}
		limit := o.Warmup + o.Window + 10*time.Second
		var fwd, off, vdrop, sdrop []float64
		var busy [][]float64
		extra := map[string][]float64{}
		var share []float64
		restarts := 0
		for rep := 0; rep < o.Reps; rep++ {
			var a, b sample
			for attempt := 0; ; attempt++ {
				g := StartGenerator(s, r, tr, gopts, limit, dir)
				time.Sleep(o.Warmup)
				var err error
				if a, err = take(r, box, g); err == nil {
					time.Sleep(o.Window)
					b, err = take(r, box, g)
				}
				g.Stop()
				if err == nil {
					break
				}
				if !errors.Is(err, errGenExited) || attempt == maxRestarts {
					s.Fatalf("%v", err)
				}
				restarts++
				fmt.Fprintf(o.Log, "    trafgen aborted (%s); window restarted\n", lastLine(g.Log()))
			}
			dt := b.at.Sub(a.at).Seconds()
			fwd = append(fwd, (b.sink.RxPackets-a.sink.RxPackets)/dt)
			off = append(off, (b.gen.TxPackets+b.gen.TxDropped-a.gen.TxPackets-a.gen.TxDropped)/dt)
			vd := b.gen.TxDropped - a.gen.TxDropped
			if r.Direct {
				vd += b.sink.RxDropped - a.sink.RxDropped
			} else {
				vd += b.box.RxDropped - a.box.RxDropped
			}
			vdrop = append(vdrop, vd/dt)
			busy = append(busy, BusyBetween(a.cpu, b.cpu))
			if box != nil {
				sdrop = append(sdrop, (b.boxc.SockDrops-a.boxc.SockDrops)/dt)
				frames := 0.0
				var perQ []float64
				for i := range b.boxc.QueueRx {
					d := b.boxc.QueueRx[i]
					if i < len(a.boxc.QueueRx) {
						d -= a.boxc.QueueRx[i]
					}
					perQ = append(perQ, d)
					frames += d
				}
				if nb := b.boxc.Batches - a.boxc.Batches; nb > 0 {
					extra["frames per batch"] = append(extra["frames per batch"], frames/nb)
					extra["sendto per batch"] = append(extra["sendto per batch"], (b.boxc.Kicks-a.boxc.Kicks)/nb)
				}
				extra["fill ring empty /s"] = append(extra["fill ring empty /s"], (b.boxc.FillEmpty-a.boxc.FillEmpty)/dt)
				extra["pipeline drops /s"] = append(extra["pipeline drops /s"], (b.boxc.PipelineDrops-a.boxc.PipelineDrops)/dt)
				if b.boxc.Flows >= 0 {
					extra["flows tracked"] = append(extra["flows tracked"], b.boxc.Flows)
				}
				if frames > 0 && len(perQ) > 1 && rep == o.Reps-1 {
					for _, d := range perQ {
						share = append(share, d/frames)
					}
				}
			}
			fmt.Fprintf(o.Log, "    rep %d: forwarded %s Mpps, offered %s Mpps\n", rep+1, bench.Mpps(fwd[rep]), bench.Mpps(off[rep]))
		}
		if restarts > 0 {
			res.Extra["trafgen restarts"] = float64(restarts)
		}
		res.Forwarded, res.Offered = bench.Summarize(fwd), bench.Summarize(off)
		res.VethDrops, res.SockDrops = bench.Summarize(vdrop), bench.Summarize(sdrop)
		res.QueueShare = share
		for k, v := range extra {
			res.Extra[k] = bench.Summarize(v).Median
		}
		for c := 0; len(busy) > 0 && c < len(busy[0]); c++ {
			var xs []float64
			for _, b := range busy {
				if c < len(b) {
					xs = append(xs, b[c])
				}
			}
			res.CPUBusy = append(res.CPUBusy, bench.Summarize(xs).Median)
		}
		if sc.Profile && o.Perf != "" {
			g := StartGenerator(s, r, tr, gopts, limit, dir)
			time.Sleep(o.Warmup)
			prof = Profile(o.Perf, sc.Name, dir, o.Window, boxComm(sc))
			if g.Running() {
				g.Stop()
			} else {
				prof.Text = "trafgen aborted during the profile: " + lastLine(g.Log()) + "\n\n" + prof.Text
			}
		}
	})
	if err != nil {
		res.Err = err.Error()
	}
	return res, prof
}

// maxRestarts bounds how often a window is restarted because trafgen
// aborted. It aborts ("Flushing TX_RING failed: Resource temporarily
// unavailable") when its socket's send buffer fills: frames queued at the
// box's receive side still count against it, and a namespace cannot raise
// net.core.wmem_max. That happens whenever the receive work is deferred
// (ksoftirqd) or runs on another CPU (threaded NAPI, RPS).
const maxRestarts = 3

var errGenExited = errors.New("trafgen exited early")

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// boxComm is the process name of the scenario's box program in profiles.
func boxComm(sc Scenario) string {
	switch sc.Kind {
	case bench.KindVIPD:
		return "vipd"
	case bench.KindForwarder:
		return "xdpfwd"
	}
	return ""
}

// rigLinks reads the interface counters of the generator, the sink and the
// box (zero when the rig has no box), the sink first: callers read their
// clock right before, and the sink's counter is the result.
func rigLinks(r *Rig) (gen, sink, box LinkStats, err error) {
	sl, err := Links(r.Sink)
	if err != nil {
		return gen, sink, box, err
	}
	gl, err := Links(r.Gen)
	if err != nil {
		return gen, sink, box, err
	}
	gen, sink = gl[GenIf], sl[SinkIf]
	if r.Box != nil {
		bl, err := Links(r.Box)
		if err != nil {
			return gen, sink, box, err
		}
		box = bl[BoxIn]
	}
	return gen, sink, box, nil
}

// take reads every counter of the rig; the sink first, right after the
// clock, since its counter is the result.
func take(r *Rig, box Box, g *Generator) (sample, error) {
	var x sample
	if !g.Running() {
		return x, fmt.Errorf("%w: %s", errGenExited, lastLine(g.Log()))
	}
	x.cpu = ReadCPU()
	x.at = time.Now()
	var err error
	if x.gen, x.sink, x.box, err = rigLinks(r); err != nil {
		return x, err
	}
	if box != nil {
		c, err := box.Counters()
		if err != nil {
			return x, fmt.Errorf("box counters: %w", err)
		}
		x.boxc = c
	}
	if !g.Running() {
		return x, fmt.Errorf("%w: %s", errGenExited, lastLine(g.Log()))
	}
	return x, nil
}
