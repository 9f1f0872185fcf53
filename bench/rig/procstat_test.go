package rig

import (
	"math"
	"strings"
	"testing"

	"github.com/vipd/vipd/bench"
)

func TestParseCPUStats(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    map[int]CPUStat
		wantErr bool
	}{
		{"two CPUs, aggregate and other lines skipped",
			"cpu  300 3 200 1000 10 1 7 2 0 0\n" +
				"cpu0 100 1 50 600 5 0 3 1 0 0\n" +
				"cpu1 200 2 150 400 5 1 4 1 9 9\n" +
				"intr 12345 0 0\nctxt 99\nbtime 1\n",
			map[int]CPUStat{
				0: {User: 100, Nice: 1, System: 50, Idle: 600, IOWait: 5, IRQ: 0, SoftIRQ: 3, Steal: 1},
				1: {User: 200, Nice: 2, System: 150, Idle: 400, IOWait: 5, IRQ: 1, SoftIRQ: 4, Steal: 1},
			}, false},
		{"eight fields are enough", "cpu3 1 2 3 4 5 6 7 8\n",
			map[int]CPUStat{3: {1, 2, 3, 4, 5, 6, 7, 8}}, false},
		{"too few fields", "cpu0 1 2 3 4\n", nil, true},
		{"not a number", "cpu0 1 2 x 4 5 6 7 8\n", nil, true},
	} {
		got, err := ParseCPUStats(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: err = %v, want error %v", tc.name, err, tc.wantErr)
			continue
		}
		if tc.wantErr {
			continue
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%s: cpu%d = %+v, want %+v", tc.name, k, got[k], v)
			}
		}
	}
}

func TestSplitBetween(t *testing.T) {
	a := CPUStat{User: 100, Nice: 10, System: 100, Idle: 500, IOWait: 0, IRQ: 0, SoftIRQ: 10, Steal: 0}
	for _, tc := range []struct {
		name string
		b    CPUStat
		want bench.CPUSplit
	}{
		// 200 ticks pass: 40 user (30 + 10 nice), 100 sys, 20 softirq, 30 idle + 10 iowait.
		{"busy", CPUStat{User: 130, Nice: 20, System: 200, Idle: 530, IOWait: 10, IRQ: 0, SoftIRQ: 30, Steal: 0},
			bench.CPUSplit{User: 0.2, Sys: 0.5, SoftIRQ: 0.1, Idle: 0.2}},
		{"no time", a, bench.CPUSplit{}},
	} {
		got := SplitBetween(a, tc.b)
		if !near(got.User, tc.want.User) || !near(got.Sys, tc.want.Sys) || !near(got.SoftIRQ, tc.want.SoftIRQ) ||
			!near(got.Idle, tc.want.Idle) || !near(got.IRQ, tc.want.IRQ) || !near(got.Steal, tc.want.Steal) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
		if tc.name == "busy" && !near(got.Busy()+got.Idle, 1) {
			t.Errorf("%s: shares sum to %v", tc.name, got.Busy()+got.Idle)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestParseTaskStat(t *testing.T) {
	tail := " S 1 4242 4242 0 -1 4194560 100 0 0 0 1234 567 0 0 20 0 5 0 99 0 0\n"
	for _, tc := range []struct {
		name    string
		in      string
		want    TaskStat
		wantErr bool
	}{
		{"plain", "4242 (vipd)" + tail, TaskStat{Comm: "vipd", PGrp: 4242, UTime: 1234, STime: 567}, false},
		{"kthread name", "77 (napi/eth0-8193)" + tail, TaskStat{Comm: "napi/eth0-8193", PGrp: 4242, UTime: 1234, STime: 567}, false},
		{"spaces and parentheses in the name", "5 (a) b (c)" + tail, TaskStat{Comm: "a) b (c", PGrp: 4242, UTime: 1234, STime: 567}, false},
		{"truncated", "5 (x) S 1 2 3 4", TaskStat{}, true},
		{"no name", "5 x S 1 2", TaskStat{}, true},
	} {
		got, err := ParseTaskStat(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v, error %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestPacketInodes(t *testing.T) {
	in := "sk               RefCnt Type Proto  Iface R Rmem   User   Inode\n" +
		"ffff8881 3      3    0003   5     1 0      0      123456\n" +
		"ffff8882 3      3    0003   5     1 0      0      99\n"
	got := PacketInodes(in)
	if len(got) != 2 || !got["123456"] || !got["99"] || got["Inode"] {
		t.Errorf("PacketInodes = %v", got)
	}
	if len(PacketInodes(strings.SplitN(in, "\n", 2)[0])) != 0 {
		t.Error("a header alone has no sockets")
	}
}

func TestFramesPerBatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b BoxCounters
		want float64 // NaN: none
	}{
		{"vipd histogram", BoxCounters{BatchFrames: 100, BatchCount: 10, Batches: 10},
			BoxCounters{BatchFrames: 1100, BatchCount: 30, Batches: 30}, 50},
		{"forwarder counters", BoxCounters{Batches: 5, QueueRx: []float64{40}},
			BoxCounters{Batches: 25, QueueRx: []float64{640}}, 30},
		{"forwarder, two queues", BoxCounters{Batches: 0, QueueRx: []float64{0, 0}},
			BoxCounters{Batches: 10, QueueRx: []float64{30, 50}}, 8},
		{"no batches", BoxCounters{Batches: 3}, BoxCounters{Batches: 3}, math.NaN()},
	} {
		got := FramesPerBatch(tc.a, tc.b)
		if math.IsNaN(tc.want) != math.IsNaN(got) || (!math.IsNaN(got) && !near(got, tc.want)) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
