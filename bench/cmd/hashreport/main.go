// Command hashreport compares vipd's backend-selection algorithms on one
// million random IPv4 flows and prints one Markdown table: the share of flows
// remapped when a backend is added (10→11) and removed (100→99), the load
// imbalance (max/mean flows per backend), the table build time and the
// per-flow lookup cost including the flow hash.
//
// Usage:
//
//	go run ./bench/cmd/hashreport [-flows 1000000] [-m 65537] [-seed 1]
//
// Everything but the timings is a deterministic function of the flags.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/vipd/vipd/hashing"
)

func main() {
	cfg := defaultConfig()
	m := uint64(cfg.m)
	flag.IntVar(&cfg.flows, "flows", cfg.flows, "number of random flows")
	flag.Uint64Var(&m, "m", m, "Maglev table size (prime, >= 100)")
	flag.Uint64Var(&cfg.seed, "seed", cfg.seed, "seed of the PCG generator of the flows and of the removed backend")
	flag.Uint64Var(&cfg.hashSeed, "hashseed", cfg.hashSeed, "flow-hash seed")
	flag.IntVar(&cfg.vnodes, "vnodes", cfg.vnodes, "ring virtual nodes per backend")
	flag.Parse()
	if m > hashing.MaxMaglevSize {
		fmt.Fprintf(os.Stderr, "hashreport: -m %d exceeds %d\n", m, hashing.MaxMaglevSize)
		os.Exit(2)
	}
	cfg.m = uint32(m)
	rows, err := measure(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hashreport:", err)
		os.Exit(1)
	}
	render(os.Stdout, cfg, rows)
}
