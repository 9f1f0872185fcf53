package bench

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func TestNsPerPacket(t *testing.T) {
	for _, tc := range []struct {
		ticks, pkts, want float64 // want NaN: none
	}{
		{100, 1e6, 1000}, // 1 s over a million packets
		{1, 1e4, 1000},   // one 10 ms tick over 10,000
		{0, 5, 0},
		{10, 0, math.NaN()},
		{10, -1, math.NaN()},
		{math.NaN(), 5, math.NaN()},
	} {
		got := NsPerPacket(tc.ticks, tc.pkts)
		if math.IsNaN(tc.want) != math.IsNaN(got) || (!math.IsNaN(got) && math.Abs(got-tc.want) > 1e-9) {
			t.Errorf("NsPerPacket(%v, %v) = %v, want %v", tc.ticks, tc.pkts, got, tc.want)
		}
	}
}

func TestBoxLimit(t *testing.T) {
	s := func(v float64) Summary { return Summary{Median: v, Min: v, Max: v, N: 1} }
	for _, tc := range []struct {
		name            string
		offered, lost   float64
		boxLimited      bool
		limitStartsWith string
	}{
		{"overloaded box", 500e3, 300e3, true, "box: lost 60.0% of offered"},
		{"just above the threshold", 100e3, 1.5e3, true, "box: lost 1.5%"},
		{"at the threshold", 100e3, 1e3, false, "generator-limited (box lost 1.0%)"},
		{"nothing lost", 100e3, 0, false, "generator-limited (box lost 0.0%)"},
		{"sink counted more than offered (window skew)", 100e3, -20, false, "generator-limited (box lost 0.0%)"},
		{"nothing offered", 0, 0, false, "nothing offered"},
	} {
		x := &BoxResult{Offered: s(tc.offered), Lost: s(tc.lost)}
		if got := x.BoxLimited(); got != tc.boxLimited {
			t.Errorf("%s: BoxLimited = %v", tc.name, got)
		}
		if got := x.Limit(); !strings.HasPrefix(got, tc.limitStartsWith) {
			t.Errorf("%s: Limit = %q, want prefix %q", tc.name, got, tc.limitStartsWith)
		}
	}
}

func TestBoxTableAndRatios(t *testing.T) {
	s := func(v float64) Summary { return Summary{Median: v, Min: v * 0.9, Max: v * 1.1, N: 3} }
	nan := math.NaN()
	r := &Report{Box: []BoxResult{
		{Name: "bare AF_XDP forwarder", Kind: KindForwarder, IO: "afxdp", Flows: 64512, Forwarded: s(200e3), Offered: s(600e3), Lost: s(400e3),
			UserNs: 200, SysNs: 900, NAPINs: 1500, BusyNs: 2800, FramesPerBatch: 64},
		{Name: "bare AF_XDP forwarder", Kind: KindForwarder, IO: "afxdp", Flows: 1, Forwarded: s(250e3), Offered: s(600e3), Lost: s(350e3),
			UserNs: 100, SysNs: 900, NAPINs: 1500, BusyNs: 2800, FramesPerBatch: 64},
		{Name: "nftables DNAT", Kind: KindKernel, Mode: "nft", Flows: 64512, Forwarded: s(180e3), Offered: s(600e3), Lost: s(420e3),
			UserNs: nan, SysNs: nan, NAPINs: 3000, BusyNs: 4000, FramesPerBatch: nan},
		{Name: "vipd NAT, AF_XDP", Kind: KindVIPD, Mode: "nat", IO: "afxdp", Flows: 64512, Forwarded: s(190e3), Offered: s(600e3), Lost: s(410e3),
			UserNs: 800, SysNs: 900, NAPINs: 1500, BusyNs: 3000, FramesPerBatch: 60},
		{Name: "vipd DSR, AF_XDP", Kind: KindVIPD, Mode: "dsr", IO: "afxdp", Flows: 1, Forwarded: s(250e3), Offered: s(250e3), Lost: s(0),
			UserNs: 140, SysNs: 900, NAPINs: 1500, BusyNs: 3000, FramesPerBatch: 8},
		{Name: "vipd DSR, AF_PACKET", Kind: KindVIPD, Mode: "dsr", IO: "afpacket", Flows: 1, Err: "boom\nline two"},
	}}
	pps, ns := r.BoxRatios(&r.Box[3])
	if math.Abs(pps-0.95) > 1e-9 || math.Abs(ns-4) > 1e-9 {
		t.Errorf("NAT 64k ratios %v %v, want 0.95 4", pps, ns)
	}
	pps, ns = r.BoxRatios(&r.Box[4]) // against the 1-flow forwarder
	if math.Abs(pps-1) > 1e-9 || math.Abs(ns-1.4) > 1e-9 {
		t.Errorf("DSR 1-flow ratios %v %v, want 1 1.4", pps, ns)
	}
	if p, n := r.BoxRatios(&BoxResult{Flows: 7}); !math.IsNaN(p) || !math.IsNaN(n) {
		t.Errorf("no forwarder with that flow count: %v %v", p, n)
	}
	// A row run with GOMAXPROCS, the frame size or the batch size set is
	// compared with the forwarder run alike, never with the default one,
	// and a default row never with that forwarder.
	for _, v := range []struct {
		name     string
		set      func(*BoxResult)
		fwd, row Summary // forwarded rates
		fwdNs    float64
	}{
		{"GOMAXPROCS=1", func(x *BoxResult) { x.Procs = 1 }, s(200e3), s(100e3), 150},
		{"frame 4096 B", func(x *BoxResult) { x.FrameSize = 4096 }, s(400e3), s(100e3), 100},
		{"batch 256", func(x *BoxResult) { x.BatchSize = 256 }, s(250e3), s(100e3), 120},
	} {
		row := BoxResult{Kind: KindVIPD, Flows: 1, Forwarded: v.row, UserNs: 300}
		v.set(&row)
		if p, n := r.BoxRatios(&row); !math.IsNaN(p) || !math.IsNaN(n) {
			t.Errorf("%s row against a default forwarder: %v %v", v.name, p, n)
		}
		fwd := BoxResult{Name: "bare AF_XDP forwarder, " + v.name, Kind: KindForwarder, Flows: 1, Forwarded: v.fwd, UserNs: v.fwdNs}
		v.set(&fwd)
		with := &Report{Box: append(append([]BoxResult(nil), r.Box...), fwd)}
		wantP, wantN := v.row.Median/v.fwd.Median, 300/v.fwdNs
		if p, n := with.BoxRatios(&row); math.Abs(p-wantP) > 1e-9 || math.Abs(n-wantN) > 1e-9 {
			t.Errorf("%s ratios %v %v, want %v %v", v.name, p, n, wantP, wantN)
		}
		if p, _ := with.BoxRatios(&r.Box[4]); math.Abs(p-1) > 1e-9 {
			t.Errorf("a default row compared with the %s forwarder: %v", v.name, p)
		}
	}
	var b bytes.Buffer
	r.WriteBoxTable(&b)
	out := b.String()
	for _, want := range []string{
		"| vipd NAT, AF_XDP | 64,512 | **190** (171–209) | 600 | 68.3% (– / – / –) |",
		"box: lost 68.3% of offered",
		"| 0.95× | 4.00× |",
		"| nftables DNAT | 64,512 |",
		"| – | – | 3000 | 4000 | – |",       // no process, no batches
		"generator-limited (box lost 0.0%)", // the DSR row did not drop
		"failed: boom line two",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "\n"); n != 2+len(r.Box) {
		t.Errorf("%d lines, want %d:\n%s", n, 2+len(r.Box), out)
	}
	// Markdown renders a table only when the separator row, and every
	// row, has the header's cells.
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for i, l := range lines {
		if got, want := strings.Count(l, "|"), strings.Count(lines[0], "|"); got != want {
			t.Errorf("line %d has %d cell bars, the header %d: %q", i, got, want, l)
		}
	}
	goals := strings.Join(r.BoxGoalLines(), "\n")
	for _, want := range []string{
		"vipd NAT, AF_XDP, 64,512 flows: 0.95× the bare forwarder's rate (goal ≥ 0.97×: **not met**), 4.00× its user ns/packet (goal ≤ 1.5×: **not met**)",
		"vipd DSR, AF_XDP, 1 flow: 1.00× the bare forwarder's rate (goal ≥ 0.97×: met), 1.40× its user ns/packet (goal ≤ 1.5×: met); vipd did not drop",
	} {
		if !strings.Contains(goals, want) {
			t.Errorf("goal lines lack %q:\n%s", want, goals)
		}
	}
	if strings.Contains(goals, "AF_PACKET") {
		t.Errorf("goals are for AF_XDP rows only:\n%s", goals)
	}
}

// TestBoxRoundRatios: with rounds, a ratio pairs the rows round by round
// and takes the median, which the ratio of the pooled medians is not;
// rows with different round counts, or none, fall back to the medians.
func TestBoxRoundRatios(t *testing.T) {
	nan := math.NaN()
	med := func(v float64) Summary { return Summary{Median: v, Min: v, Max: v, N: 3} }
	// The machine drifts: the forwarder's rate falls from round to round,
	// and vipd's with it. Per round vipd is at 0.9×, 0.95× and 1.0×; the
	// pooled medians (400k and 300k) would say 0.75×.
	fwd := BoxResult{Kind: KindForwarder, Flows: 1, Forwarded: med(400e3), UserNs: 100,
		Rounds: []BoxRound{{500e3, 100}, {400e3, 80}, {200e3, nan}}}
	vipd := BoxResult{Name: "vipd NAT, AF_XDP", Kind: KindVIPD, IO: "afxdp", Flows: 1, Forwarded: med(300e3), UserNs: 250, Offered: med(900e3), Lost: med(500e3),
		Rounds: []BoxRound{{450e3, 250}, {380e3, 240}, {200e3, 260}}}
	r := &Report{Box: []BoxResult{fwd, vipd}}
	pps, ns := r.BoxRatios(&r.Box[1])
	if math.Abs(pps-0.95) > 1e-9 {
		t.Errorf("rate ratio %v, want the per-round median 0.95", pps)
	}
	if math.Abs(ns-2.75) > 1e-9 { // 2.5 and 3.0; the third round has no forwarder figure
		t.Errorf("user ns ratio %v, want 2.75", ns)
	}
	var b bytes.Buffer
	r.WriteBoxTable(&b)
	if want := "| 0.95× (0.90–1.00) | 2.75× (2.50–3.00) |"; !strings.Contains(b.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, b.String())
	}
	if goals := strings.Join(r.BoxGoalLines(), "\n"); !strings.Contains(goals, "0.95× (0.90–1.00) the bare forwarder's rate (goal ≥ 0.97×: **not met**)") {
		t.Errorf("goal lines: %s", goals)
	}
	for name, x := range map[string]BoxResult{
		"no rounds":    {Kind: KindVIPD, Flows: 1, Forwarded: med(300e3), UserNs: 250},
		"one round":    {Kind: KindVIPD, Flows: 1, Forwarded: med(300e3), UserNs: 250, Rounds: vipd.Rounds[:1]},
		"other rounds": {Kind: KindVIPD, Flows: 1, Forwarded: med(300e3), UserNs: 250, Rounds: vipd.Rounds[:2]},
	} {
		if p, n := r.BoxRatios(&x); math.Abs(p-0.75) > 1e-9 || math.Abs(n-2.5) > 1e-9 {
			t.Errorf("%s: ratios %v %v, want the medians' 0.75 2.5", name, p, n)
		}
	}
}
