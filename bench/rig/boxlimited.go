package rig

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vipd/vipd/bench"
)

// BoxScenario is one row of the box-limited table.
type BoxScenario struct {
	Name  string
	Kind  string // bench.KindKernel ("nft"), KindForwarder or KindVIPD
	Mode  string // vipd: "nat" or "dsr"; kernel: "nft"
	IO    string // vipd: "afxdp" or "afpacket"
	Flows int    // 1 or Flows
	// Profile records a CPU profile of the box's CPU (perf -C) during
	// one extra window after the measured ones.
	Profile bool
	// BusyPoll (vipd, AF_XDP) runs vipd with busy_poll_usecs set to it;
	// NAPIDefer also sets the box veth's napi_defer_hard_irqs (2) and
	// gro_flush_timeout (200 µs), the kernel's advice for preferred busy
	// polling.
	BusyPoll  int
	NAPIDefer bool
	// Procs, when positive, sets GOMAXPROCS for the box's program (vipd or
	// the forwarder), overriding the spare P both take by default
	// (internal/procs).
	Procs int
	// FrameSize, when positive, sets the frame size of the box's program
	// (vipd's frame_size, the forwarder's -frame-size), overriding the
	// default that picks by the interfaces' MTUs.
	FrameSize int
	// BatchSize, when positive, sets the most frames the box's program
	// takes per receive call (vipd's batch_size, the forwarder's -batch),
	// overriding both programs' default, config.DefaultBatchSize.
	BatchSize int
	// FastPath (vipd, AF_XDP) turns vipd's XDP fast path on, and
	// gives the sink's veth an XDP_PASS program so that it takes frames
	// the box's XDP program redirects to it (nstest.XDPPass).
	FastPath bool
	// FastPathRefresh, when positive, sets vipd's fast_path_refresh
	// (with FastPath), overriding its default.
	FastPathRefresh time.Duration
}

// Label is the row's name with its flow count, what -only matches.
func (sc BoxScenario) Label() string {
	return "box-limited " + sc.Name + ", " + flowsText(sc.Flows)
}

// variantRows returns a copy of every row of rows that keep accepts, with
// suffix added to its name and set applied, never profiled: the rows a
// flag of the bench command adds, to compare with the default ones in one
// run (each vipd copy with the forwarder's copy, see bench.Report.findBox).
func variantRows(rows []BoxScenario, keep func(BoxScenario) bool, suffix string, set func(*BoxScenario)) []BoxScenario {
	var out []BoxScenario
	for _, sc := range rows {
		if !keep(sc) {
			continue
		}
		sc.Name += suffix
		set(&sc)
		sc.Profile = false
		out = append(out, sc)
	}
	return out
}

// vipdXDP keeps vipd's AF_XDP rows; forwarderOrVIPDXDP the bare
// forwarder's too; forwarderOrVIPD the forwarder's and all of vipd's.
func vipdXDP(sc BoxScenario) bool { return sc.Kind == bench.KindVIPD && sc.IO == "afxdp" }
func forwarderOrVIPDXDP(sc BoxScenario) bool {
	return sc.Kind == bench.KindForwarder || vipdXDP(sc)
}
func forwarderOrVIPD(sc BoxScenario) bool {
	return sc.Kind == bench.KindForwarder || sc.Kind == bench.KindVIPD
}

// BatchSizeRows returns, for the bare forwarder's rows and every vipd
// AF_XDP row of rows, the same row with the box program's batch size set
// to n: the rows -batch-size adds.
func BatchSizeRows(rows []BoxScenario, n int) []BoxScenario {
	return variantRows(rows, forwarderOrVIPDXDP, fmt.Sprintf(", batch %d", n), func(sc *BoxScenario) { sc.BatchSize = n })
}

// BusyPollRows returns, for every vipd AF_XDP row of rows, the same row
// with busy polling (busy_poll_usecs = usecs) and, with napiDefer, the
// box veth's IRQ deferral knobs: the rows -busy-poll adds.
func BusyPollRows(rows []BoxScenario, usecs int, napiDefer bool) []BoxScenario {
	suffix := fmt.Sprintf(", busy poll %dµs", usecs)
	if napiDefer {
		suffix += " + NAPI defer"
	}
	return variantRows(rows, vipdXDP, suffix, func(sc *BoxScenario) { sc.BusyPoll, sc.NAPIDefer = usecs, napiDefer })
}

// FastPathRefreshRows returns, for every vipd row of rows with the fast
// path, the same row with fast_path_refresh set to d: the rows
// -fast-path-refresh adds. Each handed-down flow sends one packet a
// refresh through the workers, which the rows' "through workers" column
// shows.
func FastPathRefreshRows(rows []BoxScenario, d time.Duration) []BoxScenario {
	return variantRows(rows, func(sc BoxScenario) bool { return vipdXDP(sc) && sc.FastPath },
		", refresh "+d.String(), func(sc *BoxScenario) { sc.FastPathRefresh = d })
}

// ProcsRows returns, for the bare forwarder's rows and every vipd AF_XDP
// row of rows, the same row with GOMAXPROCS = procs for the box's program:
// the rows -procs-rows adds (the default leaves one P besides the
// workers).
func ProcsRows(rows []BoxScenario, procs int) []BoxScenario {
	return variantRows(rows, forwarderOrVIPDXDP, fmt.Sprintf(", GOMAXPROCS=%d", procs), func(sc *BoxScenario) { sc.Procs = procs })
}

// FrameSizeRows returns, for the bare forwarder's rows and every vipd row
// of rows, the same row with the box program's frame size set to size:
// the rows -frame-size adds.
func FrameSizeRows(rows []BoxScenario, size int) []BoxScenario {
	return variantRows(rows, forwarderOrVIPD, fmt.Sprintf(", frame %d B", size), func(sc *BoxScenario) { sc.FrameSize = size })
}

// BoxScenarios is the box-limited table, in the order of the report: the
// bare forwarder first (every vipd row is compared with it), nftables,
// then vipd.
func BoxScenarios() []BoxScenario {
	s := []BoxScenario{
		{Name: "bare AF_XDP forwarder", Kind: bench.KindForwarder, IO: "afxdp", Flows: 1},
		{Name: "bare AF_XDP forwarder", Kind: bench.KindForwarder, IO: "afxdp", Flows: Flows},
		{Name: bench.NameNFT, Kind: bench.KindKernel, Mode: "nft", Flows: Flows},
	}
	for _, mode := range []string{"nat", "dsr"} {
		for _, io := range []string{"afxdp", "afpacket"} {
			for _, flows := range []int{1, Flows} {
				s = append(s, BoxScenario{
					Name: fmt.Sprintf("vipd %s, %s", map[string]string{"nat": "NAT", "dsr": "DSR"}[mode],
						map[string]string{"afxdp": "AF_XDP", "afpacket": "AF_PACKET"}[io]),
					Kind: bench.KindVIPD, Mode: mode, IO: io, Flows: flows,
					Profile: mode == "nat" && io == "afxdp" && flows == Flows,
				})
			}
		}
	}
	for _, mode := range []string{"nat", "dsr"} {
		for _, flows := range []int{1, Flows} {
			s = append(s, BoxScenario{Name: fmt.Sprintf("vipd %s, AF_XDP, XDP fast path", map[string]string{"nat": "NAT", "dsr": "DSR"}[mode]),
				Kind: bench.KindVIPD, Mode: mode, IO: "afxdp", Flows: flows, FastPath: true})
		}
	}
	return s
}

// The CPUs of the box-limited rows: the box's program and its receive
// NAPI on one, the generator alone on the other.
const (
	BoxCPU = 1
	GenCPU = 0
)

// boxSample is everything read at one instant of a box-limited row.
type boxSample struct {
	at               time.Time
	gen, box, sink   LinkStats
	boxc             BoxCounters
	cpu              CPUStat
	proc             TaskStat
	napi             []TaskStat
	hasProc, hasBoxc bool
}

// RunBox builds a box-limited row's rig inside a child of parent: the
// box's receive veth with threaded NAPI, its kthreads and the box's
// program pinned to BoxCPU, trafgen alone on GenCPU with a send buffer
// large enough to keep offering while the box drops (GenSendBuffer). One
// trafgen runs through the warm-up and every window. A failure is
// returned in the result's Err.
func RunBox(parent *Scope, sc BoxScenario, o Options) (bench.BoxResult, *bench.Section) {
	res, ws, prof := runBox(parent, sc, o)
	if res.Err == "" {
		summarizeBox(&res, ws)
	}
	return res, prof
}

// RunBoxRounds runs rows in rounds: every row once per round (o.Reps
// windows, rig built anew), in the order given, then the next round. A
// vipd row's ratio to the bare forwarder then pairs, round by round,
// windows a few rows apart rather than the whole table apart, so that the
// drift of a shared machine over the minutes a table takes weighs less.
//
// Each result pools the windows of its rounds (its medians, minimum and
// maximum are over all of them) and, with more than one round, keeps each
// round's medians in Rounds (NaN for a round that failed). A row whose
// every round failed carries the last error. Profiles are taken in the
// last round only. progress, if not nil, is called before each row of
// each round with a nil result, and after it with that round's result.
func RunBoxRounds(parent *Scope, rows []BoxScenario, o Options, rounds int, progress func(round int, sc BoxScenario, res *bench.BoxResult)) ([]bench.BoxResult, []bench.Section) {
	return runRounds(rows, rounds, func(sc BoxScenario) (bench.BoxResult, []boxWindow, *bench.Section) {
		return runBox(parent, sc, o)
	}, progress)
}

// runRounds is RunBoxRounds with the row runner run.
func runRounds(rows []BoxScenario, rounds int, run func(BoxScenario) (bench.BoxResult, []boxWindow, *bench.Section), progress func(round int, sc BoxScenario, res *bench.BoxResult)) ([]bench.BoxResult, []bench.Section) {
	rounds = max(rounds, 1)
	out := make([]bench.BoxResult, len(rows))
	pooled := make([][]boxWindow, len(rows))
	per := make([][]bench.BoxRound, len(rows))
	var profs []bench.Section
	for r := 0; r < rounds; r++ {
		for i, sc := range rows {
			if r < rounds-1 {
				sc.Profile = false
			}
			if progress != nil {
				progress(r, sc, nil)
			}
			res, ws, prof := run(sc)
			if prof != nil {
				profs = append(profs, *prof)
			}
			round := bench.BoxRound{Forwarded: math.NaN(), UserNs: math.NaN()}
			if res.Err == "" {
				summarizeBox(&res, ws)
				pooled[i] = append(pooled[i], ws...)
				round = bench.BoxRound{Forwarded: res.Forwarded.Median, UserNs: res.UserNs}
			}
			per[i] = append(per[i], round)
			if progress != nil {
				progress(r, sc, &res)
			}
			restarts := out[i].Restarts + res.Restarts
			if res.Err == "" || len(pooled[i]) == 0 {
				out[i] = res // the row's identity, NAPI threads, or its last error while no round succeeded
			}
			out[i].Restarts = restarts
		}
	}
	for i := range out {
		if len(pooled[i]) == 0 {
			continue // every round failed: out[i] has the last error
		}
		out[i].Err = ""
		summarizeBox(&out[i], pooled[i])
		if rounds > 1 {
			out[i].Rounds = per[i]
		}
	}
	return out, profs
}

// runBox is RunBox without the summary: the windows it measured, none
// when it failed.
func runBox(parent *Scope, sc BoxScenario, o Options) (bench.BoxResult, []boxWindow, *bench.Section) {
	o.Defaults()
	res := bench.BoxResult{Name: sc.Name, Kind: sc.Kind, Mode: sc.Mode, IO: sc.IO, Flows: sc.Flows, Procs: sc.Procs, FrameSize: sc.FrameSize, BatchSize: sc.BatchSize,
		UserNs: math.NaN(), SysNs: math.NaN(), NAPINs: math.NaN(), BusyNs: math.NaN(), FramesPerBatch: math.NaN(), WorkerShare: math.NaN()}
	s := parent.Child()
	defer s.Close()
	var prof *bench.Section
	var ws []boxWindow
	dir, err := os.MkdirTemp(o.Dir, "box")
	if err != nil {
		res.Err = err.Error()
		return res, nil, nil
	}
	s.Cleanup(func() { os.RemoveAll(dir) })
	err = Try(func() {
		r := New(s, 1, false)
		tr := Traffic{DstMAC: r.BoxInMAC, Dst: VIPNAT, DstPort: VIPPort, OneFlow: sc.Flows == 1}
		pl := Placement{CPUs: strconv.Itoa(BoxCPU), Nice: o.BoxNice}
		if sc.Procs > 0 {
			pl.Env = []string{"GOMAXPROCS=" + strconv.Itoa(sc.Procs)}
		}
		var box Box
		switch sc.Kind {
		case bench.KindKernel:
			SetupNFT(s, r, dir)
			EnableGRO(s, r.Box, BoxIn)
		case bench.KindForwarder:
			r.Box.Sysctl(s, "net.ipv4.ip_forward", "0")
			var args []string
			if sc.FrameSize > 0 {
				args = append(args, "-frame-size", strconv.Itoa(sc.FrameSize))
			}
			if sc.BatchSize > 0 {
				args = append(args, "-batch", strconv.Itoa(sc.BatchSize))
			}
			box = StartForwarder(s, r, o.XDPFwd, pl, dir, args...)
		case bench.KindVIPD:
			r.Box.Sysctl(s, "net.ipv4.ip_forward", "0")
			var extra []string
			if sc.FrameSize > 0 {
				extra = append(extra, fmt.Sprintf("frame_size = %d", sc.FrameSize))
			}
			if sc.BatchSize > 0 {
				extra = append(extra, fmt.Sprintf("batch_size = %d", sc.BatchSize))
			}
			if sc.BusyPoll > 0 {
				extra = append(extra, fmt.Sprintf("busy_poll_usecs = %d", sc.BusyPoll))
			}
			if sc.FastPath {
				extra = append(extra, "fast_path = true")
				if sc.FastPathRefresh > 0 {
					extra = append(extra, fmt.Sprintf("fast_path_refresh = %q", sc.FastPathRefresh.String()))
				}
				r.Sink.XDPPass(s, SinkIf)
			} else {
				// The userspace rows: the workers forward every packet,
				// whatever "auto" would decide on another rig.
				extra = append(extra, `fast_path = "off"`)
			}
			if sc.NAPIDefer {
				Sysfs(s, r.Box, BoxIn, "napi_defer_hard_irqs", "2")
				Sysfs(s, r.Box, BoxIn, "gro_flush_timeout", "200000")
			}
			box = StartVIPD(s, r, o.VIPD, pl, sc.IO, dir, extra...)
			if sc.IO == "afpacket" {
				EnableGRO(s, r.Box, BoxIn)
			}
			if sc.Mode == "dsr" {
				tr.Dst = VIPDSR
			}
		default:
			s.Fatalf("rig: no box-limited scenario of kind %q", sc.Kind)
		}
		napi := ThreadedNAPI(s, r.Box, BoxIn, BoxCPU)
		res.NAPIThreads = len(napi)
		for _, pid := range napi {
			if o.BoxNice == 0 {
				break
			}
			if err := unix.Setpriority(unix.PRIO_PROCESS, pid, o.BoxNice); err != nil {
				s.Fatalf("rig: nice %d for NAPI kthread %d: %v", o.BoxNice, pid, err)
			}
		}
		gopts := GenOptions{CPUs: strconv.Itoa(GenCPU), Procs: 1, SendBuffer: GenSendBuffer}
		limit := o.Warmup + time.Duration(o.Reps+1)*o.Window + 15*time.Second
		g := StartGenerator(s, r, tr, gopts, limit, dir)
		time.Sleep(o.Warmup)
		a, err := takeBox(r, box, g, napi)
		for len(ws) < o.Reps {
			if err == nil {
				time.Sleep(o.Window)
				var b boxSample
				if b, err = takeBox(r, box, g, napi); err == nil {
					w := deltaBox(a, b)
					ws = append(ws, w)
					fmt.Fprintf(o.Log, "    rep %d: forwarded %s kpps, offered %s kpps, lost %.1f%%\n", len(ws),
						kp(w.fwd), kp(w.off), 100*bench.Ratio(w.off-w.fwd, w.off))
					a = b
					continue
				}
			}
			if res.Restarts == maxRestarts || g.Running() {
				s.Fatalf("%v", err)
			}
			res.Restarts++
			fmt.Fprintf(o.Log, "    trafgen aborted (%s); restarted\n", lastLine(g.Log()))
			g.Stop()
			g = StartGenerator(s, r, tr, gopts, limit, dir)
			time.Sleep(o.Warmup)
			a, err = takeBox(r, box, g, napi)
		}
		if sc.Profile && o.Perf != "" {
			prof = ProfileCPU(o.Perf, "box CPU, box-limited "+sc.Name+", "+flowsText(sc.Flows), dir, o.Window, boxComm(Scenario{Kind: sc.Kind}), BoxCPU)
			if !g.Running() {
				prof.Text = "trafgen aborted during the profile: " + lastLine(g.Log()) + "\n\n" + prof.Text
			}
		}
		g.Stop()
	})
	if err != nil {
		res.Err = err.Error()
		return res, nil, prof
	}
	return res, ws, prof
}

func flowsText(n int) string {
	if n == 1 {
		return "1 flow"
	}
	return fmt.Sprintf("%d flows", n)
}

func kp(pps float64) string { return fmt.Sprintf("%.0f", pps/1e3) }

// takeBox reads every counter of a box-limited rig.
func takeBox(r *Rig, box Box, g *Generator, napi []int) (boxSample, error) {
	var x boxSample
	if !g.Running() {
		return x, fmt.Errorf("%w: %s", errGenExited, lastLine(g.Log()))
	}
	cs, err := ReadCPUStats()
	if err != nil {
		return x, err
	}
	x.cpu = cs[BoxCPU]
	x.at = time.Now()
	if x.gen, x.sink, x.box, err = rigLinks(r); err != nil {
		return x, err
	}
	for _, pid := range napi {
		st, err := ReadTaskStat(pid)
		if err != nil {
			return x, fmt.Errorf("NAPI kthread %d: %w", pid, err)
		}
		x.napi = append(x.napi, st)
	}
	if box != nil {
		if x.proc, err = ReadTaskStat(box.PID()); err != nil {
			return x, fmt.Errorf("box process: %w", err)
		}
		x.hasProc = true
		if x.boxc, err = box.Counters(); err != nil {
			return x, fmt.Errorf("box counters: %w", err)
		}
		x.hasBoxc = true
	}
	if !g.Running() {
		return x, fmt.Errorf("%w: %s", errGenExited, lastLine(g.Log()))
	}
	return x, nil
}

// boxWindow is one window's rates and costs.
type boxWindow struct {
	fwd, off, lost, ring, rx, sock float64 // per second
	cpu                            bench.CPUSplit
	others                         float64
	userNs, sysNs, napiNs          float64
	busyNs, framesPerBatch         float64
	// workerShare: the frames vipd's workers took (its batch-size
	// histogram's sum) per packet forwarded; below 1 with the XDP fast
	// path, which forwards the rest in the kernel.
	workerShare float64
}

// deltaBox turns two samples into one window's figures; the box's CPU
// costs are per packet counted at the sink.
func deltaBox(a, b boxSample) boxWindow {
	dt := b.at.Sub(a.at).Seconds()
	pkts := b.sink.RxPackets - a.sink.RxPackets
	w := boxWindow{
		fwd:    pkts / dt,
		off:    (b.gen.TxPackets + b.gen.TxDropped - a.gen.TxPackets - a.gen.TxDropped) / dt,
		ring:   (b.gen.TxDropped - a.gen.TxDropped) / dt,
		rx:     (b.box.RxDropped - a.box.RxDropped) / dt,
		cpu:    SplitBetween(a.cpu, b.cpu),
		userNs: math.NaN(), sysNs: math.NaN(), napiNs: math.NaN(), framesPerBatch: math.NaN(),
		workerShare: math.NaN(),
	}
	w.lost = w.off - w.fwd
	busy := b.cpu.Total() - b.cpu.Idle - b.cpu.IOWait - (a.cpu.Total() - a.cpu.Idle - a.cpu.IOWait)
	w.busyNs = bench.NsPerPacket(busy, pkts)
	own := 0.0 // ticks charged to the box process and its NAPI kthreads
	if len(a.napi) == len(b.napi) && len(b.napi) > 0 {
		t := 0.0
		for i := range b.napi {
			t += b.napi[i].UTime + b.napi[i].STime - a.napi[i].UTime - a.napi[i].STime
		}
		w.napiNs = bench.NsPerPacket(t, pkts)
		own += t
	}
	if a.hasProc && b.hasProc {
		w.userNs = bench.NsPerPacket(b.proc.UTime-a.proc.UTime, pkts)
		w.sysNs = bench.NsPerPacket(b.proc.STime-a.proc.STime, pkts)
		own += b.proc.UTime + b.proc.STime - a.proc.UTime - a.proc.STime
	}
	w.others = math.NaN()
	if total := b.cpu.Total() - a.cpu.Total(); total > 0 {
		w.others = max(busy-own, 0) / total
	}
	if a.hasBoxc && b.hasBoxc {
		w.sock = (b.boxc.SockDrops - a.boxc.SockDrops) / dt
		w.framesPerBatch = FramesPerBatch(a.boxc, b.boxc)
		if b.boxc.BatchCount > a.boxc.BatchCount && pkts > 0 {
			w.workerShare = (b.boxc.BatchFrames - a.boxc.BatchFrames) / pkts
		}
	}
	return w
}

// FramesPerBatch is the mean batch between two readings of a box's
// counters: vipd's batch-size histogram when it has one, else the frames
// received over the batches counted (the forwarder); NaN without batches.
func FramesPerBatch(a, b BoxCounters) float64 {
	if n := b.BatchCount - a.BatchCount; n > 0 {
		return (b.BatchFrames - a.BatchFrames) / n
	}
	if n := b.Batches - a.Batches; n > 0 {
		f := 0.0
		for i, q := range b.QueueRx {
			f += q
			if i < len(a.QueueRx) {
				f -= a.QueueRx[i]
			}
		}
		return f / n
	}
	return math.NaN()
}

// summarizeBox fills res with the medians over the windows.
func summarizeBox(res *bench.BoxResult, ws []boxWindow) {
	col := func(f func(w boxWindow) float64) []float64 {
		var xs []float64
		for _, w := range ws {
			xs = append(xs, f(w))
		}
		return xs
	}
	med := func(f func(w boxWindow) float64) float64 {
		s := bench.Summarize(col(f))
		if s.N == 0 {
			return math.NaN()
		}
		return s.Median
	}
	res.Forwarded = bench.Summarize(col(func(w boxWindow) float64 { return w.fwd }))
	res.Offered = bench.Summarize(col(func(w boxWindow) float64 { return w.off }))
	res.Lost = bench.Summarize(col(func(w boxWindow) float64 { return w.lost }))
	res.RingDrops = bench.Summarize(col(func(w boxWindow) float64 { return w.ring }))
	res.RxDrops = bench.Summarize(col(func(w boxWindow) float64 { return w.rx }))
	res.SockDrops = bench.Summarize(col(func(w boxWindow) float64 { return w.sock }))
	res.CPU = bench.CPUSplit{
		User:    med(func(w boxWindow) float64 { return w.cpu.User }),
		Sys:     med(func(w boxWindow) float64 { return w.cpu.Sys }),
		IRQ:     med(func(w boxWindow) float64 { return w.cpu.IRQ }),
		SoftIRQ: med(func(w boxWindow) float64 { return w.cpu.SoftIRQ }),
		Steal:   med(func(w boxWindow) float64 { return w.cpu.Steal }),
		Idle:    med(func(w boxWindow) float64 { return w.cpu.Idle }),
	}
	res.Others = med(func(w boxWindow) float64 { return w.others })
	res.UserNs = med(func(w boxWindow) float64 { return w.userNs })
	res.SysNs = med(func(w boxWindow) float64 { return w.sysNs })
	res.NAPINs = med(func(w boxWindow) float64 { return w.napiNs })
	res.BusyNs = med(func(w boxWindow) float64 { return w.busyNs })
	res.FramesPerBatch = med(func(w boxWindow) float64 { return w.framesPerBatch })
	res.WorkerShare = med(func(w boxWindow) float64 { return w.workerShare })
}
