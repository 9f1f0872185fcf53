package main

import (
	"fmt"
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
	// One run per round; the rounds of a column in order.
	b := func(ns ...float64) []bench.GoBench {
		var r []bench.GoBench
		for _, v := range ns {
			r = append(r, bench.GoBench{Metrics: map[string]float64{"ns/pkt": v, "allocs/op": 0}})
		}
		return r
	}
	// The old binary had a slow round 2, the new one a slow round 3:
	// divided round by round, those rounds' ratios are the outliers
	// (0.50 and 0.95) and the median is round 1's 0.90×; the medians'
	// ratio (150 / 200) would mix the rounds into 0.75×.
	then := map[string][]bench.GoBench{"Pipeline/nat/hit/flows=1/64B": b(100, 300, 200), "Pipeline/gone": b(10)}
	now := map[string][]bench.GoBench{"Pipeline/nat/hit/flows=1/64B": b(90, 150, 190), "Pipeline/new": b(7)}
	pgo := map[string][]bench.GoBench{"Pipeline/nat/hit/flows=1/64B": b(80, 120, 180), "Pipeline/new": b(6)}
	out := baselineTable("abc", [3]map[string][]bench.GoBench{then, now, pgo})
	for _, want := range []string{"0.90× (0.50–0.95)", "0.80× (0.40–0.90)", "200.0", "150.0", "120.0"} {
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

func TestRoundRatios(t *testing.T) {
	b := func(ns ...float64) []bench.GoBench {
		var r []bench.GoBench
		for _, v := range ns {
			r = append(r, bench.GoBench{Metrics: map[string]float64{"ns/pkt": v}})
		}
		return r
	}
	for _, tc := range []struct {
		name string
		a, b []bench.GoBench
		want []float64
	}{
		{"paired by round", b(100, 200, 50), b(50, 50, 50), []float64{0.5, 0.25, 1}},
		{"a round missing on one side", b(100, 200), b(50), nil},
		{"a zero", b(0), b(50), nil},
		{"a run without the metric", []bench.GoBench{{Metrics: map[string]float64{}}}, b(50), nil},
	} {
		got := roundRatios(tc.a, tc.b, "ns/pkt")
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: roundRatios = %v, want %v", tc.name, got, tc.want)
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
