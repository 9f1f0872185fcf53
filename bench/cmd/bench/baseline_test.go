package main

import (
	"strings"
	"testing"

	"github.com/vipd/vipd/bench"
)

func TestMedianMetric(t *testing.T) {
	run := func(v float64) bench.GoBench { return bench.GoBench{Metrics: map[string]float64{"ns/pkt": v}} }
	for _, tc := range []struct {
		in   []float64
		want float64
		ok   bool
	}{
		{nil, 0, false},
		{[]float64{5}, 5, true},
		{[]float64{9, 1, 5}, 5, true},
		{[]float64{4, 1, 3, 2}, 2.5, true},
	} {
		var runs []bench.GoBench
		for _, v := range tc.in {
			runs = append(runs, run(v))
		}
		if got, ok := medianMetric(runs, "ns/pkt"); got != tc.want || ok != tc.ok {
			t.Errorf("medianMetric(%v) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestBaselineTable(t *testing.T) {
	b := func(ns float64) []bench.GoBench {
		return []bench.GoBench{{Metrics: map[string]float64{"ns/pkt": ns, "allocs/op": 0}}}
	}
	then := map[string][]bench.GoBench{"Pipeline/nat/hit/flows=1/64B": b(200), "Pipeline/gone": b(10)}
	now := map[string][]bench.GoBench{"Pipeline/nat/hit/flows=1/64B": b(100), "Pipeline/new": b(7)}
	pgo := map[string][]bench.GoBench{"Pipeline/nat/hit/flows=1/64B": b(90), "Pipeline/new": b(6)}
	out := baselineTable("abc", [3]map[string][]bench.GoBench{then, now, pgo})
	for _, want := range []string{"0.50×", "0.45×", "200.0", "100.0", "90.0"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if (strings.HasPrefix(line, "Pipeline/gone") || strings.HasPrefix(line, "Pipeline/new")) && !strings.Contains(line, "–") {
			t.Errorf("a benchmark on one side only needs a dash: %q", line)
		}
	}
}

func TestCallgrindRefs(t *testing.T) {
	for _, tc := range []struct {
		out  string
		want float64
		ok   bool
	}{
		{"==123== Collected : 9\n==123== \n==123== I   refs:      337,901,100\n", 337901100, true},
		{"==1== I   refs:      42\n", 42, true},
		{"no summary\n", 0, false},
		{"==1== I   refs:      n/a\n", 0, false},
	} {
		got, ok := callgrindRefs(tc.out)
		if got != tc.want || ok != tc.ok {
			t.Errorf("callgrindRefs(%q) = %v, %v; want %v, %v", tc.out, got, ok, tc.want, tc.ok)
		}
	}
}
