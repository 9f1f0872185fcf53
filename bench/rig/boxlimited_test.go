package rig

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/bench"
	"github.com/vipd/vipd/control/config"
)

func TestDeltaBox(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := boxSample{
		at:   t0,
		gen:  LinkStats{TxPackets: 1000, TxDropped: 100},
		box:  LinkStats{RxDropped: 10},
		sink: LinkStats{RxPackets: 500},
		cpu:  CPUStat{User: 100, System: 100, SoftIRQ: 0, Idle: 100},
		proc: TaskStat{UTime: 10, STime: 20},
		napi: []TaskStat{{STime: 50}},
		boxc: BoxCounters{SockDrops: 5, BatchFrames: 0, BatchCount: 0},
		// the process and counters are there
		hasProc: true, hasBoxc: true,
	}
	// 2 s later: 400,000 packets forwarded, 1,000,000 offered (900,000
	// sent + 100,000 dropped at the veth), 200 ticks of the box CPU:
	// 100 ticks user (80 the process's), 80 sys, 10 softirq, 10 idle.
	b := a
	b.at = t0.Add(2 * time.Second)
	b.gen = LinkStats{TxPackets: 901000, TxDropped: 100100}
	b.box = LinkStats{RxDropped: 20010}
	b.sink = LinkStats{RxPackets: 400500}
	b.cpu = CPUStat{User: 200, System: 180, SoftIRQ: 10, Idle: 110}
	b.proc = TaskStat{UTime: 90, STime: 40}
	b.napi = []TaskStat{{STime: 110}}
	b.boxc = BoxCounters{SockDrops: 2005, BatchFrames: 400000, BatchCount: 6250}
	w := deltaBox(a, b)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"forwarded/s", w.fwd, 200000},
		{"offered/s", w.off, 500000},
		{"lost/s", w.lost, 300000},
		{"ring drops/s", w.ring, 50000},
		{"rx path drops/s", w.rx, 10000},
		{"socket drops/s", w.sock, 1000},
		// 80 ticks = 0.8 s over 400,000 packets
		{"user ns/pkt", w.userNs, 2000},
		{"sys ns/pkt", w.sysNs, 500},
		{"NAPI ns/pkt", w.napiNs, 1500},
		// 190 busy ticks = 1.9 s
		{"busy ns/pkt", w.busyNs, 4750},
		{"frames per batch", w.framesPerBatch, 64},
		// 400,000 frames through the workers for 400,000 forwarded
		{"through workers", w.workerShare, 1},
		{"user share", w.cpu.User, 0.5},
		// busy 190 − own (80 + 20 + 60) = 30 of 200 ticks
		{"others", w.others, 0.15},
	} {
		if math.Abs(c.got-c.want) > 1e-6*math.Max(1, math.Abs(c.want)) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	// Without a box process (nftables) its figures are NaN, not 0.
	a.hasProc, b.hasProc, a.hasBoxc, b.hasBoxc = false, false, false, false
	w = deltaBox(a, b)
	if !math.IsNaN(w.userNs) || !math.IsNaN(w.sysNs) || !math.IsNaN(w.framesPerBatch) || !math.IsNaN(w.workerShare) || math.IsNaN(w.napiNs) {
		t.Errorf("no process: user %v sys %v fpb %v napi %v", w.userNs, w.sysNs, w.framesPerBatch, w.napiNs)
	}
}

func TestSummarizeBox(t *testing.T) {
	ws := []boxWindow{
		{fwd: 100, off: 300, lost: 200, userNs: 700, sysNs: math.NaN(), napiNs: 1, busyNs: 1, framesPerBatch: math.NaN()},
		{fwd: 300, off: 400, lost: 100, userNs: 900, sysNs: math.NaN(), napiNs: 1, busyNs: 1, framesPerBatch: math.NaN()},
		{fwd: 200, off: 500, lost: 300, userNs: 800, sysNs: math.NaN(), napiNs: 1, busyNs: 1, framesPerBatch: math.NaN()},
	}
	var res bench.BoxResult
	summarizeBox(&res, ws)
	if res.Forwarded.Median != 200 || res.Forwarded.Min != 100 || res.Forwarded.Max != 300 || res.Lost.Median != 200 {
		t.Errorf("forwarded %+v, lost %+v", res.Forwarded, res.Lost)
	}
	if res.UserNs != 800 || !math.IsNaN(res.SysNs) || !math.IsNaN(res.FramesPerBatch) {
		t.Errorf("user %v, sys %v, frames per batch %v", res.UserNs, res.SysNs, res.FramesPerBatch)
	}
}

func TestBoxScenarios(t *testing.T) {
	seen := map[string]bool{}
	count := map[string]int{}
	for _, sc := range BoxScenarios() {
		if seen[sc.Label()] {
			t.Errorf("duplicate row %q", sc.Label())
		}
		seen[sc.Label()] = true
		if sc.Flows != 1 && sc.Flows != Flows {
			t.Errorf("%s: %d flows", sc.Label(), sc.Flows)
		}
		count[sc.Kind]++
	}
	// the bare forwarder at 1 and 64k flows, nftables, vipd NAT and DSR
	// × AF_XDP and AF_PACKET × 1 and 64k flows, vipd NAT and DSR with
	// the fast path at 1 and 64k flows
	if count[bench.KindForwarder] != 2 || count[bench.KindKernel] != 1 || count[bench.KindVIPD] != 12 {
		t.Errorf("rows per kind: %v", count)
	}
	if s := BoxScenarios(); s[0].Kind != bench.KindForwarder {
		t.Error("the bare forwarder must come first: every vipd row is compared with it")
	}
}

// checkCopiedRows checks that rows, copies of rows of base with a setting
// changed, each have a label of their own (no base row's, no other
// copy's) that names the setting (suffix).
func checkCopiedRows(t *testing.T, base, rows []BoxScenario, suffix string) {
	t.Helper()
	seen := map[string]bool{}
	for _, sc := range base {
		seen[sc.Label()] = true
	}
	for _, sc := range rows {
		if seen[sc.Label()] || !strings.Contains(sc.Label(), suffix) {
			t.Errorf("row label %q", sc.Label())
		}
		seen[sc.Label()] = true
	}
}

func TestBusyPollRows(t *testing.T) {
	base := BoxScenarios()
	rows := BusyPollRows(base, 50, true)
	// vipd NAT and DSR over AF_XDP, 1 and 64k flows, with and without
	// the fast path
	if len(rows) != 8 {
		t.Fatalf("%d busy-poll rows, want 8: %+v", len(rows), rows)
	}
	checkCopiedRows(t, base, rows, "busy poll 50µs + NAPI defer")
	for _, sc := range rows {
		if sc.Kind != bench.KindVIPD || sc.IO != "afxdp" || sc.BusyPoll != 50 || !sc.NAPIDefer || sc.Profile {
			t.Errorf("row %+v", sc)
		}
	}
	// The rows must match the -only filter of the row they copy.
	if !regexp.MustCompile("vipd NAT, AF_XDP").MatchString(rows[0].Label()) {
		t.Errorf("%q does not match its base row's filter", rows[0].Label())
	}
}

// TestVariantRows: each flag's rows are copies of the rows it applies to,
// renamed, with the one setting changed and no profile, and the default
// rows set nothing; the rig's vipd configuration takes each setting.
func TestVariantRows(t *testing.T) {
	base := BoxScenarios()
	for _, tc := range []struct {
		name   string
		rows   []BoxScenario
		suffix string
		// want: the forwarder's 2 rows, vipd NAT and DSR at 1 and 64k
		// flows over AF_XDP and the fast path's 4 (8) or both drivers
		// (12); never nftables
		fwd, vipd int
		set       func(BoxScenario) bool
		config    string
		parsed    func(*config.Config) bool
	}{
		{"GOMAXPROCS", ProcsRows(base, 1), ", GOMAXPROCS=1", 2, 8, func(sc BoxScenario) bool { return sc.Procs == 1 }, "", nil},
		{"frame size", FrameSizeRows(base, 4096), ", frame 4096 B", 2, 12, func(sc BoxScenario) bool { return sc.FrameSize == 4096 },
			"frame_size = 4096", func(c *config.Config) bool { return c.Dataplane.FrameSize == 4096 }},
		{"batch size", BatchSizeRows(base, 256), ", batch 256", 2, 8, func(sc BoxScenario) bool { return sc.BatchSize == 256 },
			"batch_size = 256", func(c *config.Config) bool { return c.Dataplane.BatchSize == 256 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.rows) != tc.fwd+tc.vipd || tc.rows[0].Kind != bench.KindForwarder || tc.rows[1].Kind != bench.KindForwarder {
				t.Fatalf("%d rows, want the forwarder's %d first and %d of vipd: %+v", len(tc.rows), tc.fwd, tc.vipd, tc.rows)
			}
			checkCopiedRows(t, base, tc.rows, tc.suffix)
			for _, sc := range tc.rows {
				if !tc.set(sc) || sc.Profile || sc.Kind == bench.KindKernel || tc.vipd == 8 && sc.Kind == bench.KindVIPD && sc.IO != "afxdp" {
					t.Errorf("row %+v", sc)
				}
			}
			for _, sc := range base {
				if tc.set(sc) {
					t.Errorf("a base row sets the %s: %+v", tc.name, sc)
				}
			}
			if !regexp.MustCompile("bare AF_XDP forwarder").MatchString(tc.rows[0].Label()) {
				t.Errorf("%q does not match its base row's filter", tc.rows[0].Label())
			}
			if tc.config == "" {
				return
			}
			cfg, _, err := config.Parse("rig.toml", []byte(VIPDConfig("afxdp", 1, tc.config)))
			if err != nil {
				t.Fatal(err)
			}
			if !tc.parsed(cfg) {
				t.Errorf("%q not in the parsed configuration", tc.config)
			}
		})
	}
}

// TestRunRounds: every row runs once per round, in order; a row pools its
// rounds' windows and keeps each round's medians, NaN for a failed round;
// a row that failed every round keeps the error; only the last round
// profiles.
func TestRunRounds(t *testing.T) {
	rows := []BoxScenario{
		{Name: "fwd", Kind: bench.KindForwarder, Flows: 1},
		{Name: "vipd", Kind: bench.KindVIPD, Flows: 1, Profile: true},
		{Name: "broken", Kind: bench.KindVIPD, Flows: Flows},
	}
	win := func(fwd, userNs float64) boxWindow {
		return boxWindow{fwd: fwd, off: 2 * fwd, lost: fwd, userNs: userNs, sysNs: math.NaN(), napiNs: 1, busyNs: 1, framesPerBatch: math.NaN()}
	}
	var order []string
	calls := map[string]int{}
	run := func(sc BoxScenario) (bench.BoxResult, []boxWindow, *bench.Section) {
		order = append(order, sc.Name)
		calls[sc.Name]++
		n := calls[sc.Name]
		res := bench.BoxResult{Name: sc.Name, Kind: sc.Kind, Flows: sc.Flows, Restarts: 1}
		var prof *bench.Section
		if sc.Profile {
			prof = &bench.Section{Title: fmt.Sprintf("profile of %s, round %d", sc.Name, n)}
		}
		switch {
		case sc.Name == "broken" || sc.Name == "vipd" && n == 2:
			res.Err = fmt.Sprintf("failed in round %d", n)
			return res, nil, prof
		case sc.Name == "fwd":
			return res, []boxWindow{win(100*float64(n), 10), win(110*float64(n), 20)}, prof
		}
		return res, []boxWindow{win(90*float64(n), 30)}, prof
	}
	var done []string
	res, profs := runRounds(rows, 3, run, func(round int, sc BoxScenario, r *bench.BoxResult) {
		if r == nil {
			done = append(done, fmt.Sprintf("%d %s starts", round, sc.Name))
			return
		}
		done = append(done, fmt.Sprintf("%d %s %s", round, r.Name, r.Err))
	})
	if want := "fwd vipd broken fwd vipd broken fwd vipd broken"; strings.Join(order, " ") != want {
		t.Errorf("run order %q, want %q", strings.Join(order, " "), want)
	}
	if len(done) != 18 || done[8] != "1 vipd starts" || done[9] != "1 vipd failed in round 2" {
		t.Errorf("progress calls: %q", done)
	}
	if len(profs) != 1 || profs[0].Title != "profile of vipd, round 3" {
		t.Errorf("profiles %+v, want the last round's only", profs)
	}
	fwd, vipd, broken := res[0], res[1], res[2]
	// The forwarder's six windows: 100, 110, 200, 220, 300, 330.
	if fwd.Err != "" || fwd.Forwarded.Min != 100 || fwd.Forwarded.Max != 330 || fwd.Forwarded.Median != 210 || fwd.Restarts != 3 {
		t.Errorf("forwarder pooled %+v, restarts %d, err %q", fwd.Forwarded, fwd.Restarts, fwd.Err)
	}
	if len(fwd.Rounds) != 3 || fwd.Rounds[1] != (bench.BoxRound{Forwarded: 210, UserNs: 15}) {
		t.Errorf("forwarder rounds %+v", fwd.Rounds)
	}
	if vipd.Err != "" || vipd.Forwarded.N != 2 || vipd.Forwarded.Median != 180 || len(vipd.Rounds) != 3 ||
		vipd.Rounds[0].Forwarded != 90 || !math.IsNaN(vipd.Rounds[1].Forwarded) || !math.IsNaN(vipd.Rounds[1].UserNs) || vipd.Rounds[2].Forwarded != 270 {
		t.Errorf("vipd: err %q, pooled %+v, rounds %+v", vipd.Err, vipd.Forwarded, vipd.Rounds)
	}
	if broken.Err != "failed in round 3" || broken.Rounds != nil || broken.Forwarded.N != 0 {
		t.Errorf("broken: err %q, rounds %+v, pooled %+v", broken.Err, broken.Rounds, broken.Forwarded)
	}
	// One round: no Rounds, so the ratios are of the medians.
	calls = map[string]int{}
	if one, _ := runRounds(rows[:1], 1, run, nil); one[0].Rounds != nil || one[0].Forwarded.N != 2 {
		t.Errorf("one round: %+v", one[0])
	}
}

// TestFastPathRefreshRows: -fast-path-refresh copies the fast path rows
// alone (vipd NAT and DSR at 1 and 64k flows), which pair with the base
// forwarder rows, and the rig's vipd configuration takes the refresh.
func TestFastPathRefreshRows(t *testing.T) {
	base := BoxScenarios()
	rows := FastPathRefreshRows(base, 10*time.Second)
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 4: %+v", len(rows), rows)
	}
	checkCopiedRows(t, base, rows, ", refresh 10s")
	for _, sc := range rows {
		if sc.Kind != bench.KindVIPD || !sc.FastPath || sc.FastPathRefresh != 10*time.Second || sc.Profile {
			t.Errorf("row %+v", sc)
		}
	}
	for _, sc := range base {
		if sc.FastPathRefresh != 0 {
			t.Errorf("a base row sets the refresh: %+v", sc)
		}
	}
	cfg, _, err := config.Parse("rig.toml", []byte(VIPDConfig("afxdp", 1, "fast_path = true", `fast_path_refresh = "10s"`)))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Dataplane.FastPathRefresh.D() != 10*time.Second {
		t.Errorf("refresh %v", cfg.Dataplane.FastPathRefresh)
	}
}
