// Package bench holds vipd's benchmark harness and its results: the hashing
// report, the in-memory pipeline benchmarks and the on-interface
// packets-per-second rig. The daemon never imports it.
package bench
