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
