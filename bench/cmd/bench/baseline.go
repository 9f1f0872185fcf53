package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/vipd/vipd/bench"
)

// baselinePipeline are the in-memory pipeline benchmarks compared against
// an older revision: the sub-benchmarks BenchmarkPipeline has had under the
// same names since before the batch pipeline.
const baselinePipeline = "^BenchmarkPipeline$/^(nat|dsr)$/^(hit|miss)$/^flows=(1|1000000)$/^64B$"

// baselineSection builds the dataplane test binary of revision rev (from
// `git archive`, so the working tree is not touched) and of the working
// tree, runs their BenchmarkPipeline alternately rounds times, and
// tabulates the medians: ns per packet then and now, the ratio, and the
// allocations. Alternating the two binaries spreads the machine's drift
// over both columns.
func baselineSection(root, rev string, rounds int, benchtime string) bench.Section {
	sec := bench.Section{Title: "In memory: this tree against " + rev,
		Intro: fmt.Sprintf("`go test -c ./dataplane` of %s (git archive) and of the working tree, each run %d times in turn with "+
			"`-test.bench '%s' -test.benchtime %s`; medians of ns/pkt. Ratio = now ÷ then (lower is faster).", rev, rounds, baselinePipeline, benchtime)}
	dir, err := os.MkdirTemp("", "vipd-bench-baseline")
	if err != nil {
		sec.Text = err.Error()
		return sec
	}
	defer os.RemoveAll(dir)
	old := filepath.Join(dir, "src")
	if err := os.Mkdir(old, 0o755); err != nil {
		sec.Text = err.Error()
		return sec
	}
	archive := exec.Command("sh", "-c", fmt.Sprintf("git -C %q archive %q | tar -x -C %q", root, rev, old))
	if out, err := archive.CombinedOutput(); err != nil {
		sec.Text = fmt.Sprintf("git archive %s: %v\n%s", rev, err, out)
		return sec
	}
	bins := [2]string{filepath.Join(dir, "then.test"), filepath.Join(dir, "now.test")}
	for i, src := range []string{old, root} {
		cmd := exec.Command("go", "test", "-c", "-o", bins[i], "./dataplane")
		cmd.Dir = src
		if out, err := cmd.CombinedOutput(); err != nil {
			sec.Text = fmt.Sprintf("go test -c in %s: %v\n%s", src, err, out)
			return sec
		}
	}
	runs := [2]map[string][]bench.GoBench{{}, {}}
	for r := 0; r < rounds; r++ {
		for i, bin := range bins {
			cmd := exec.Command(bin, "-test.run", "^$", "-test.bench", baselinePipeline, "-test.benchtime", benchtime, "-test.benchmem")
			cmd.Dir = filepath.Join(root, "dataplane")
			var buf bytes.Buffer
			cmd.Stdout, cmd.Stderr = &buf, &buf
			if err := cmd.Run(); err != nil {
				sec.Text = fmt.Sprintf("%s: %v\n%s", bin, err, buf.String())
				return sec
			}
			res, err := bench.ParseGoBench(&buf)
			if err != nil {
				sec.Text = err.Error()
				return sec
			}
			for _, b := range res {
				runs[i][b.Name] = append(runs[i][b.Name], b)
			}
		}
	}
	sec.Text = baselineTable(rev, runs[0], runs[1])
	return sec
}

// baselineTable formats the comparison of two sets of runs by benchmark
// name; a name missing from either side is listed with a dash.
func baselineTable(rev string, then, now map[string][]bench.GoBench) string {
	names := map[string]bool{}
	for n := range then {
		names[n] = true
	}
	for n := range now {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	var b strings.Builder
	fmt.Fprintf(&b, "%-40s %12s %12s %7s %11s\n", "benchmark", rev+" ns/pkt", "now ns/pkt", "ratio", "allocs/pkt")
	for _, n := range sorted {
		t, okT := medianMetric(then[n], "ns/pkt")
		w, okW := medianMetric(now[n], "ns/pkt")
		allocs, _ := medianMetric(now[n], "allocs/op")
		col := func(v float64, ok bool) string {
			if !ok {
				return "–"
			}
			return fmt.Sprintf("%.1f", v)
		}
		ratio := "–"
		if okT && okW && t > 0 {
			ratio = fmt.Sprintf("%.2f×", w/t)
		}
		fmt.Fprintf(&b, "%-40s %12s %12s %7s %11.0f\n", n, col(t, okT), col(w, okW), ratio, allocs)
	}
	return b.String()
}

// medianMetric returns the median of one metric over runs.
func medianMetric(runs []bench.GoBench, unit string) (float64, bool) {
	var v []float64
	for _, r := range runs {
		if x, ok := r.Metrics[unit]; ok {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return 0, false
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2], true
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2, true
}
