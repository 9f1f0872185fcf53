package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	p := defaultParams()
	out := "bench/results"
	flag.Uint64Var(&p.seed, "seed", p.seed, "seed of the flows' PCG generator")
	flag.Float64Var(&p.rate, "rate", p.rate, "new flows per second")
	flag.DurationVar(&p.duration, "duration", p.duration, "simulated time (the events are at 40s, 70s and 90s)")
	flag.StringVar(&out, "out", out, "directory for sched.md and sched.svg; empty: print only")
	flag.Parse()
	rs, err := run(p)
	if err != nil {
		fmt.Fprintln(os.Stderr, "schedreport:", err)
		os.Exit(1)
	}
	var md bytes.Buffer
	render(&md, p, rs)
	os.Stdout.Write(md.Bytes())
	if out == "" {
		return
	}
	var svg bytes.Buffer
	chart(&svg, p, rs)
	for name, b := range map[string][]byte{"sched.md": md.Bytes(), "sched.svg": svg.Bytes()} {
		if err := os.WriteFile(filepath.Join(out, name), b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "schedreport:", err)
			os.Exit(1)
		}
	}
}
