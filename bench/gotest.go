package bench

import (
	"bufio"
	"io"
	"strconv"
	"strings"
)

// GoBench is one result line of `go test -bench`.
type GoBench struct {
	Pkg  string // import path, from the "pkg:" line above it
	Name string // without the "Benchmark" prefix and the -GOMAXPROCS suffix
	N    int64  // iterations
	// Metrics by unit: "ns/op", "B/op", "allocs/op", and whatever the
	// benchmark reported ("ns/pkt", "pkt/s", "MB/s", ...).
	Metrics map[string]float64
}

// ParseGoBench reads `go test -bench` output (several packages may be
// concatenated) and returns its result lines in order. Lines that are not
// results (logs, PASS, ok) are skipped.
func ParseGoBench(r io.Reader) ([]GoBench, error) {
	var out []GoBench
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			continue
		}
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		f := strings.Fields(line)
		// name, iterations, then value-unit pairs.
		if len(f) < 4 || len(f)%2 != 0 {
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		b := GoBench{Pkg: pkg, Name: trimProcs(strings.TrimPrefix(f[0], "Benchmark")), N: n, Metrics: map[string]float64{}}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			b.Metrics[f[i+1]] = v
		}
		out = append(out, b)
	}
	return out, sc.Err()
}

// trimProcs drops the "-N" GOMAXPROCS suffix go test appends to a name.
func trimProcs(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return name
	}
	if _, err := strconv.Atoi(name[i+1:]); err != nil {
		return name
	}
	return name[:i]
}
