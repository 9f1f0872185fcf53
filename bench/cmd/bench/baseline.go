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

// pgoProfile is the profile vipd's main package is built with (make pgo
// refreshes it); go build picks it up by itself (-pgo=auto).
const pgoProfile = "cmd/vipd/default.pgo"

// baselinePipeline are the in-memory pipeline benchmarks compared against
// an older revision: the sub-benchmarks BenchmarkPipeline has had under the
// same names since before the batch pipeline.
const baselinePipeline = "^BenchmarkPipeline$/^(nat|dsr)$/^(hit|miss)$/^flows=(1|1000000)$/^64B$"

// baselineSection builds the dataplane test binary of revision rev (from
// `git archive`, so the working tree is not touched) and of the working
// tree, the latter without and with vipd's PGO profile, runs their
// BenchmarkPipeline in turn rounds times, and tabulates the medians: ns
// per packet then and now, the ratios, and the allocations. Alternating
// the binaries spreads the machine's drift over every column; a ratio is
// the median of the rounds' ratios (each divides two runs seconds apart),
// as the box-limited table's are, so that a slow minute on this shared
// machine moves one round's ratio and not a column's median.
func baselineSection(root, rev string, rounds int, benchtime string) bench.Section {
	sec := bench.Section{Title: "In memory: this tree against " + rev,
		Intro: fmt.Sprintf("`go test -c ./dataplane` of %s (git archive) and of the working tree, the latter twice: without PGO (now) "+
			"and with the profile vipd is built with, %s (now PGO, as `go build ./cmd/vipd` compiles the pipeline); "+
			"each run %d times in turn with `-test.bench '%s' -test.benchtime %s`; medians of ns/pkt. Ratios = now ÷ then (lower is faster): "+
			"the median of the rounds' ratios, each of two runs seconds apart, with their range in parentheses.",
			rev, pgoProfile, rounds, baselinePipeline, benchtime)}
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
	bins := [3]string{filepath.Join(dir, "then.test"), filepath.Join(dir, "now.test"), filepath.Join(dir, "now-pgo.test")}
	for i, b := range []struct{ src, pgo string }{{old, "off"}, {root, "off"}, {root, filepath.Join(root, pgoProfile)}} {
		cmd := exec.Command("go", "test", "-c", "-pgo="+b.pgo, "-o", bins[i], "./dataplane")
		cmd.Dir = b.src
		if out, err := cmd.CombinedOutput(); err != nil {
			sec.Text = fmt.Sprintf("go test -c -pgo=%s in %s: %v\n%s", b.pgo, b.src, err, out)
			return sec
		}
	}
	runs := [3]map[string][]bench.GoBench{{}, {}, {}}
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
	sec.Text = baselineTable(rev, runs)
	if _, err := exec.LookPath("valgrind"); err != nil {
		sec.Text += "\n(valgrind is not installed: no instruction counts)\n"
		return sec
	}
	sec.Text += "\n" + instructionTable(rev, bins, filepath.Join(root, "dataplane"))
	return sec
}

// instructionBenchmarks are the rows of instructionTable: the one-flow
// rows of baselinePipeline (at 1M flows the setup alone takes minutes
// under valgrind), each with the packet count N of its shorter run. A
// miss row's N is past the 64Ki-slot table's fill, so that both runs
// measure what a timed run does nearly all the time: a full table, where
// every new flow evicts one.
var instructionBenchmarks = []struct {
	re string
	n  int
}{
	{"^BenchmarkPipeline$/^nat$/^hit$/^flows=1$/^64B$", 16000},
	{"^BenchmarkPipeline$/^dsr$/^hit$/^flows=1$/^64B$", 16000},
	{"^BenchmarkPipeline$/^nat$/^miss$/^flows=1$/^64B$", 200000},
	{"^BenchmarkPipeline$/^dsr$/^miss$/^flows=1$/^64B$", 200000},
}

// instructionTable counts the instructions per packet of the binaries
// (then, now, now with PGO) under callgrind: (I(2N) − I(N)) / N, which
// cancels the setup. Unlike time it does not depend on what else the
// machine does, so it tells a small change from noise; it does not see
// memory stalls.
func instructionTable(rev string, bins [3]string, dir string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Instructions per packet (valgrind --tool=callgrind, (I(2N) − I(N)) / N; deterministic, blind to cache misses):\n\n")
	fmt.Fprintf(&b, "%-50s %7s %12s %10s %10s %7s %7s\n", "benchmark", "N", rev+" instr", "now", "now PGO", "ratio", "PGO")
	for _, row := range instructionBenchmarks {
		var v [3]float64
		var err error
		for i, bin := range bins {
			// valgrind now and then stops on an instruction it does not
			// know (SIGILL in the Go runtime's cputicks): try again.
			for try := 0; try < 3; try++ {
				if v[i], err = instructionsPerPacket(bin, row.re, dir, row.n); err == nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		if err != nil {
			fmt.Fprintf(&b, "%-50s %v (three times)\n", row.re, err)
			continue
		}
		fmt.Fprintf(&b, "%-50s %7d %12.0f %10.0f %10.0f %6.2f× %6.2f×\n", row.re, row.n, v[0], v[1], v[2], v[1]/v[0], v[2]/v[0])
	}
	return b.String()
}

// instructionsPerPacket runs benchmark re of the test binary bin under
// callgrind for n and 2n packets and returns the difference per
// packet. One P, no GC and no asynchronous preemption keep the runtime's
// own work out of the difference.
func instructionsPerPacket(bin, re, dir string, n int) (float64, error) {
	var refs [2]float64
	for i, n := range []int{n, 2 * n} {
		cmd := exec.Command("valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
			bin, "-test.run", "^$", "-test.bench", re, "-test.benchtime", fmt.Sprintf("%dx", n))
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GODEBUG=asyncpreemptoff=1", "GOMAXPROCS=1", "GOGC=off")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return 0, fmt.Errorf("valgrind %s: %v", filepath.Base(bin), err)
		}
		v, ok := callgrindRefs(out.String())
		if !ok {
			return 0, fmt.Errorf("valgrind %s: no instruction count in its output", filepath.Base(bin))
		}
		refs[i] = v
	}
	return (refs[1] - refs[0]) / float64(n), nil
}

// callgrindRefs reads the total from callgrind's summary line
// "==PID== I   refs:      1,234,567".
func callgrindRefs(out string) (float64, bool) {
	for _, line := range strings.Split(out, "\n") {
		_, after, ok := strings.Cut(line, "I   refs:")
		if !ok {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(strings.ReplaceAll(strings.TrimSpace(after), ",", ""), &v); err == nil {
			return v, true
		}
	}
	return 0, false
}

// baselineTable formats the comparison of the sets of runs (then, now,
// now with PGO) by benchmark name; a name missing from a set is listed
// with a dash.
func baselineTable(rev string, runs [3]map[string][]bench.GoBench) string {
	names := map[string]bool{}
	for _, r := range runs {
		for n := range r {
			names[n] = true
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	var b strings.Builder
	fmt.Fprintf(&b, "%-40s %12s %8s %8s %18s %18s %11s\n", "benchmark", rev+" ns/pkt", "now", "now PGO", "ratio", "PGO", "allocs/pkt")
	for _, n := range sorted {
		var v [3]float64
		var ok [3]bool
		for i, r := range runs {
			v[i], ok[i] = medianMetric(r[n], "ns/pkt")
		}
		allocs := 0.0
		for _, r := range runs[1:] {
			a, _ := medianMetric(r[n], "allocs/op")
			allocs = max(allocs, a)
		}
		col := func(i int) string {
			if !ok[i] {
				return "–"
			}
			return fmt.Sprintf("%.1f", v[i])
		}
		ratio := func(i int) string {
			s := bench.Summarize(roundRatios(runs[0][n], runs[i][n], "ns/pkt"))
			if s.N == 0 {
				return "–"
			}
			return fmt.Sprintf("%.2f× (%.2f–%.2f)", s.Median, s.Min, s.Max)
		}
		fmt.Fprintf(&b, "%-40s %12s %8s %8s %18s %18s %11.0f\n", n, col(0), col(1), col(2), ratio(1), ratio(2), allocs)
	}
	return b.String()
}

// roundRatios divides one metric of each round's run b by the same
// round's run a: runs are appended round by round, so index r of either
// list is round r (a benchmark that failed to report in some round would
// shift the pairing: then none is paired).
func roundRatios(a, b []bench.GoBench, unit string) []float64 {
	if len(a) != len(b) {
		return nil
	}
	var r []float64
	for i := range a {
		x, okx := a[i].Metrics[unit]
		y, oky := b[i].Metrics[unit]
		if !okx || !oky || x <= 0 {
			return nil
		}
		r = append(r, y/x)
	}
	return r
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
