// Command bench is `make bench`: it runs vipd's Go benchmarks (the
// in-memory pipeline, conntrack, hashing), then the on-interface rig of
// package bench/rig — every scenario in throwaway network namespaces,
// measured over fixed windows and removed again — and writes one report:
// OUT/latest.md (tables, environment, counters, profiles) and
// OUT/latest.svg (the chart).
//
// The rig needs root, trafgen (netsniff-ng), nft (nftables), taskset and
// ip; perf (linux-perf) is optional and adds CPU profiles. The Makefile
// installs the Debian packages when they are missing. Ctrl-C removes
// everything the run created.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/vipd/vipd/bench"
	"github.com/vipd/vipd/bench/rig"
	"github.com/vipd/vipd/testing/nstest"
	"github.com/vipd/vipd/testing/testkit"
)

// scope owns everything the run creates; fatal and Ctrl-C close it.
var scope = &rig.Scope{}

func main() {
	out := flag.String("out", "bench/results", "directory for latest.md and latest.svg")
	window := flag.Duration("window", 5*time.Second, "measured window per repetition")
	reps := flag.Int("reps", 3, "windows per scenario of the sender-limited table")
	rounds := flag.Int("rounds", 3, "box-limited table: rounds, each running every row once, in turn (a vipd row's ratio to the forwarder is the median of the per-round ratios)")
	boxWindows := flag.Int("box-windows", 1, "box-limited table: windows per row in each round")
	only := flag.String("only", "", "run only the rig scenarios whose name matches this regexp (box-limited rows are matched as \"box-limited NAME, 1 flow\" or \"..., 64512 flows\")")
	tables := flag.String("tables", "box,sender", "rig tables to run: box (box-limited, the headline), sender (sender-limited), or both")
	skipInMem := flag.Bool("skip-inmem", false, "skip the Go benchmarks")
	skipRig := flag.Bool("skip-rig", false, "skip the on-interface rig")
	benchtime := flag.String("benchtime", "0.5s", "go test -benchtime of the in-memory benchmarks")
	command := flag.String("command", "make bench", "the command line to print in the report")
	threaded := flag.Bool("threaded-napi", false, "switch the box's receive veth to threaded NAPI")
	genProcs := flag.Int("gen-procs", 1, "trafgen processes (CPUs 0..n-1)")
	baseline := flag.String("baseline", "91273fb", "git revision whose in-memory pipeline benchmark the report compares against (empty: none)")
	baselineRounds := flag.Int("baseline-rounds", 5, "rounds of the comparison with -baseline, each running the three test binaries in turn; its ratios are the medians of the rounds'")
	boxNice := flag.Int("box-nice", -10, "nice value of the box-limited rows' box program and NAPI kthreads (0: unchanged), so that other tasks on a shared machine take less of the box's CPU")
	busyPoll := flag.Int("busy-poll", 0, "also run every vipd AF_XDP box-limited row with busy_poll_usecs set to this (0: no such rows); the rows are named \"..., busy poll Nµs\"")
	procsRows := flag.Int("procs-rows", 0, "also run the bare forwarder's and every vipd AF_XDP box-limited row with GOMAXPROCS set to this for the box's program (0: no such rows), to compare with the default of one P besides the workers; the rows are named \"..., GOMAXPROCS=N\"")
	batchSize := flag.Int("batch-size", 0, "also run the bare forwarder's and every vipd AF_XDP box-limited row with the box program's batch size (frames per receive call) set to this (0: no such rows; the default rows use config.DefaultBatchSize); the rows are named \"..., batch N\"")
	frameSize := flag.Int("frame-size", 0, "also run the bare forwarder's and every vipd box-limited row with the box program's frame size set to this, 2048 or 4096 (0: no such rows; the default rows pick by the interfaces' MTUs); the rows are named \"..., frame N B\"")
	var refreshes durations
	flag.Var(&refreshes, "fast-path-refresh", "also run every vipd fast path box-limited row with fast_path_refresh set to each of these (comma-separated durations, e.g. 2s,10s); the rows are named \"..., refresh D\"")
	busyDefer := flag.Bool("busy-poll-napi-defer", false, "in the -busy-poll rows, also set the box veth's napi_defer_hard_irqs=2 and gro_flush_timeout=200000")
	flag.Parse()
	var filter *regexp.Regexp
	if *only != "" {
		filter = regexp.MustCompile(*only)
	}
	if !*skipRig && os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "bench: the rig needs root (network namespaces, XDP): run `sudo make bench`, or -skip-rig")
		os.Exit(1)
	}
	root, err := testkit.ModuleRoot()
	if err != nil {
		fatal(err)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	go func() {
		<-sigs
		fmt.Fprintln(os.Stderr, "\nbench: interrupted: removing namespaces and processes")
		scope.Close()
		os.Exit(130)
	}()
	defer scope.Close()

	rep := &bench.Report{Env: environment(root, *command)}
	start := time.Now()
	if !*skipInMem {
		fmt.Println("== in-memory Go benchmarks (dataplane, conntrack, hashing)")
		rep.InMem, err = goBench(root, *benchtime)
		if err != nil {
			fatal(err)
		}
		if *baseline != "" {
			fmt.Println("== in-memory pipeline against " + *baseline)
			rep.Sections = append(rep.Sections, baselineSection(root, *baseline, *baselineRounds, "1s"))
		}
		fmt.Println("== CPU profile of the pipeline's conntrack-hit path (pprof)")
		rep.Sections = append(rep.Sections, pipelineProfile(root))
	}
	if !*skipRig {
		want := map[string]bool{}
		for _, t := range strings.Split(*tables, ",") {
			switch t = strings.TrimSpace(t); t {
			case "box", "sender":
				want[t] = true
			default:
				fatal(fmt.Errorf("-tables: unknown table %q (box, sender)", t))
			}
		}
		base := rig.BoxScenarios()
		rows := base
		if *procsRows > 0 {
			rows = append(rows, rig.ProcsRows(base, *procsRows)...)
		}
		if *busyPoll > 0 {
			rows = append(rows, rig.BusyPollRows(base, *busyPoll, *busyDefer)...)
		}
		if *frameSize > 0 {
			rows = append(rows, rig.FrameSizeRows(base, *frameSize)...)
		}
		if *batchSize > 0 {
			rows = append(rows, rig.BatchSizeRows(base, *batchSize)...)
		}
		for _, d := range refreshes {
			rows = append(rows, rig.FastPathRefreshRows(base, d)...)
		}
		runRig(rep, root, rig.Options{
			Window: *window, Reps: *reps, Threaded: *threaded, GenProcs: *genProcs,
			GenCPUs: cpuList(*genProcs), BoxNice: *boxNice,
		}, boxPlan{rows: rows, rounds: max(*rounds, 1), windows: max(*boxWindows, 1)}, filter, want)
	}
	rep.Env.LoadAfter = loadavg()
	rep.Env.Notes = append(rep.Env.Notes, fmt.Sprintf("run took %s", time.Since(start).Round(time.Second)))
	if err := write(rep, *out); err != nil {
		fatal(err)
	}
	fmt.Printf("\nwrote %s and %s (%s)\n", filepath.Join(*out, "latest.md"), filepath.Join(*out, "latest.svg"), time.Since(start).Round(time.Second))
}

// boxPlan is how the box-limited table runs: its rows, in rounds of
// windows windows per row.
type boxPlan struct {
	rows            []rig.BoxScenario
	rounds, windows int
}

func runRig(rep *bench.Report, root string, o rig.Options, box boxPlan, filter *regexp.Regexp, tables map[string]bool) {
	for _, tool := range []string{"trafgen", "nft", "taskset", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			fatal(fmt.Errorf("the rig needs %s (make bench installs netsniff-ng and nftables)", tool))
		}
	}
	if p, err := exec.LookPath("perf"); err == nil && exec.Command(p, "--version").Run() == nil {
		o.Perf = p
	} else {
		rep.Env.Notes = append(rep.Env.Notes, "perf not available: no CPU profiles")
	}
	// Leftovers of a run that was killed before its cleanups ran.
	if gone := nstest.SweepStale(); len(gone) > 0 {
		fmt.Printf("removed stale namespaces of dead runs: %v\n", gone)
	}
	// and the send-buffer default a killed run left raised.
	if did, err := rig.RepairWmemDefault(); err != nil {
		fatal(fmt.Errorf("net.core.wmem_default: %w", err))
	} else if did != "" {
		fmt.Println(did)
	}
	dir, err := os.MkdirTemp("", "vipd-bench")
	if err != nil {
		fatal(err)
	}
	scope.Cleanup(func() { os.RemoveAll(dir) })
	o.Dir = dir
	o.Log = os.Stdout
	fmt.Println("== building vipd and the bare AF_XDP forwarder")
	o.VIPD, o.XDPFwd = filepath.Join(dir, "vipd"), filepath.Join(dir, "xdpfwd")
	for pkg, bin := range map[string]string{"./cmd/vipd": o.VIPD, "./bench/cmd/xdpfwd": o.XDPFwd} {
		cmd := exec.Command("go", "build", "-o", bin, pkg)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			fatal(fmt.Errorf("go build %s: %v\n%s", pkg, err, b))
		}
	}
	o.Defaults()
	rep.Env.Notes = append(rep.Env.Notes, layoutNotes(o, box)...)
	if tables["box"] {
		start := time.Now()
		var rows []rig.BoxScenario
		for _, sc := range box.rows {
			if filter == nil || filter.MatchString(sc.Label()) {
				rows = append(rows, sc)
			}
		}
		bo := o
		bo.Reps = box.windows
		res, profs := rig.RunBoxRounds(scope, rows, bo, box.rounds, func(round int, sc rig.BoxScenario, res *bench.BoxResult) {
			if res == nil {
				fmt.Printf("== round %d/%d: %s\n", round+1, box.rounds, sc.Label())
				return
			}
			if res.Err != "" {
				fmt.Printf("    failed: %s\n", res.Err)
			} else {
				fmt.Printf("    median %.0f kpps (%.0f–%.0f), offered %.0f kpps: %s\n", res.Forwarded.Median/1e3,
					res.Forwarded.Min/1e3, res.Forwarded.Max/1e3, res.Offered.Median/1e3, res.Limit())
			}
		})
		rep.Box = append(rep.Box, res...)
		rep.Sections = append(rep.Sections, profs...)
		if len(rep.Box) > 0 {
			rep.Env.Notes = append(rep.Env.Notes, fmt.Sprintf("box-limited rows took %s", time.Since(start).Round(time.Second)))
		}
	}
	if !tables["sender"] {
		return
	}
	for _, sc := range rig.Scenarios() {
		if filter != nil && !filter.MatchString(sc.Name) {
			continue
		}
		fmt.Printf("== %s\n", sc.Name)
		res, prof := rig.Run(scope, sc, o)
		if res.Err != "" {
			fmt.Printf("    failed: %s\n", res.Err)
		} else {
			fmt.Printf("    median %s Mpps (%s–%s), offered %s Mpps\n", bench.Mpps(res.Forwarded.Median),
				bench.Mpps(res.Forwarded.Min), bench.Mpps(res.Forwarded.Max), bench.Mpps(res.Offered.Median))
		}
		rep.Rig = append(rep.Rig, res)
		if prof != nil {
			rep.Sections = append(rep.Sections, *prof)
		}
	}
}

// cpuList is "0" or "0-N" for the first n CPUs.
func cpuList(n int) string {
	if n <= 1 {
		return "0"
	}
	return fmt.Sprintf("0-%d", n-1)
}

func layoutNotes(o rig.Options, box boxPlan) []string {
	n := []string{
		fmt.Sprintf("traffic: %d-byte UDP frames (64 with FCS), %d flows (%d client addresses × %d source ports, both stepping per frame) or 1 flow, trafgen through the kernel's qdisc path (-q) so that its transmit hash spreads flows over the veth queues", rig.FrameLen, rig.Flows, rig.Clients, rig.SourcePorts),
		fmt.Sprintf("box-limited table: %d rounds, each running every row in turn (rig, box program and trafgen started anew), %d window(s) of %v per row and round after a %v warm-up; a row's figures are over its windows of all rounds, its ratios to the bare forwarder the median of the per-round ratios; one queue; the box's receive veth in threaded NAPI, its kthread and the box's program pinned to CPU %d, trafgen alone on CPU %d; trafgen's socket gets a %d KiB send buffer (the root namespace's net.core.wmem_default raised only while trafgen opens it, then restored) so that it keeps offering while the box drops", box.rounds, box.windows, o.Window, o.Warmup, rig.BoxCPU, rig.GenCPU, rig.GenSendBuffer>>10) + boxNiceNote(o.BoxNice),
		fmt.Sprintf("sender-limited table: %d windows of %v per scenario after a %v warm-up each, trafgen restarted per window; forwarded = packets counted at the sink's veth, offered = the generator's veth tx packets + tx drops", o.Reps, o.Window, o.Warmup),
		fmt.Sprintf("sender-limited CPUs: trafgen on CPU %s (%d process); the box's program (vipd or the forwarder) pinned to CPU 1 with one queue, free on CPUs 0-1 with two", o.GenCPUs, max(o.GenProcs, 1)),
		"sender-limited: veth receive work (the box's XDP program and AF_XDP copy, or the kernel's whole forwarding path) runs in the softirq of the CPU that sends into the veth: the generator's CPU for the box's receive side, the box program's CPU for the sink's",
	}
	if o.Threaded {
		n = append(n, "sender-limited: threaded NAPI on the box's receive veth (-threaded-napi)")
	}
	return n
}

func boxNiceNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; the box program and the NAPI kthread run at nice %d, so that other tasks on a shared machine take less of the box CPU", n)
}

// goBench runs the in-memory benchmarks and parses their output; the full
// output is kept next to the report's working files only on failure.
func goBench(root, benchtime string) ([]bench.GoBench, error) {
	cmd := exec.Command("go", "test", "-run", "^$", "-bench", ".", "-benchmem", "-benchtime", benchtime, "-count", "1", "-timeout", "20m",
		"./dataplane", "./conntrack", "./hashing")
	cmd.Dir = root
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go test -bench: %v\n%s", err, buf.String())
	}
	return bench.ParseGoBench(&buf)
}

// pipelineProfile profiles the in-memory NAT conntrack-hit benchmark with
// pprof: where the ns/packet of the ≤ 50 ns goal go.
func pipelineProfile(root string) bench.Section {
	const name = "Pipeline/nat/hit/flows=1/64B"
	sec := bench.Section{Title: "Profile: in-memory " + name,
		Intro: "`go test -bench '" + name + "' -cpuprofile` (2 s), then `go tool pprof -top`: one worker on one core, every packet a conntrack hit; " +
			"the benchmark's own header restore (HeaderRestore in the table) is part of it."}
	dir, err := os.MkdirTemp("", "vipd-bench-pprof")
	if err != nil {
		sec.Text = err.Error()
		return sec
	}
	defer os.RemoveAll(dir)
	bin, prof := filepath.Join(dir, "dataplane.test"), filepath.Join(dir, "cpu.out")
	run := func(args ...string) ([]byte, error) {
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		return cmd.CombinedOutput()
	}
	if out, err := run("test", "-run", "^$", "-bench", "^BenchmarkPipeline$/^nat$/^hit$/^flows=1$/^64B$", "-benchtime", "2s",
		"-cpuprofile", prof, "-o", bin, "./dataplane"); err != nil {
		sec.Text = fmt.Sprintf("go test failed: %v\n%s", err, out)
		return sec
	}
	out, err := run("tool", "pprof", "-top", "-nodecount", "22", bin, prof)
	if err != nil {
		sec.Text = fmt.Sprintf("pprof failed: %v\n%s", err, out)
		return sec
	}
	// Drop pprof's header lines that name temporary files and the clock.
	var keep []string
	for _, l := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(l, "File:") && !strings.HasPrefix(l, "Build ID:") && !strings.HasPrefix(l, "Time:") {
			keep = append(keep, l)
		}
	}
	sec.Text = strings.Join(keep, "\n")
	return sec
}

func write(rep *bench.Report, out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	var svg bytes.Buffer
	if len(rep.Rig) > 0 {
		if err := rep.WriteSVG(&svg, "vipd rig, sender-limited table: forwarded packets per second ("+rep.Env.Date+")"); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, "latest.svg"), svg.Bytes(), 0o644); err != nil {
			return err
		}
	}
	var md bytes.Buffer
	chart := ""
	if len(rep.Rig) > 0 {
		chart = "latest.svg"
	}
	rep.WriteMarkdown(&md, chart)
	return os.WriteFile(filepath.Join(out, "latest.md"), md.Bytes(), 0o644)
}

func environment(root, command string) bench.Env {
	e := bench.Env{
		Date:       time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		Kernel:     strings.TrimSpace(readFile("/proc/sys/kernel/osrelease")),
		CPU:        cpuModel(),
		CPUs:       runtime.NumCPU(),
		GoVersion:  runtime.Version(),
		Command:    command,
		LoadBefore: loadavg(),
	}
	cmd := exec.Command("git", "describe", "--always", "--dirty")
	cmd.Dir = root
	if b, err := cmd.Output(); err == nil {
		e.Commit = strings.TrimSpace(string(b))
	} else {
		e.Commit = "unknown (not a git checkout)"
	}
	return e
}

func cpuModel() string {
	for _, l := range strings.Split(readFile("/proc/cpuinfo"), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func loadavg() string {
	f := strings.Fields(readFile("/proc/loadavg"))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	scope.Close()
	os.Exit(1)
}

// durations is a flag holding a comma-separated list of durations, each
// above zero.
type durations []time.Duration

func (d *durations) String() string {
	var s []string
	for _, x := range *d {
		s = append(s, x.String())
	}
	return strings.Join(s, ",")
}

func (d *durations) Set(v string) error {
	for _, f := range strings.Split(v, ",") {
		x, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil {
			return err
		}
		if x <= 0 {
			return fmt.Errorf("%s: not above zero", f)
		}
		*d = append(*d, x)
	}
	return nil
}
