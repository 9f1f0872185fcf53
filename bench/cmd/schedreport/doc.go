// Command schedreport compares vipd's schedulers of new flows (maglev,
// maglev_bounded, wrr, lc, p2c) in a simulation that runs the dataplane's
// own scheduler code (dataplane.Chooser, what a worker runs on a
// conntrack miss) on two boxes behind ECMP: backends of different
// capacities, heavy-tailed (Pareto) flow durations, one backend that
// slows down mid-run, a backend added and one removed. Each box sees only
// its own flows, summed once a simulated second as the daemon does, plus
// the flows it pinned since.
//
// For each scheduler it prints (and writes to bench/results/sched.md,
// with a chart in sched.svg): the load imbalance (max/mean active flows per
// unit of capacity, averaged over time), the share of time the slowed
// backend spends overloaded after it slowed, the share of flows whose
// choice changes when a backend is added and when one is removed, and how
// often the two boxes agree on a new flow's backend.
//
// Usage:
//
//	go run ./bench/cmd/schedreport [-seed 1] [-rate 3000] [-duration 120s] [-out bench/results]
//
// The output is a deterministic function of the flags.
package main
