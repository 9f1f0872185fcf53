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
