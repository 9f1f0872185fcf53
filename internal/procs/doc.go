// Package procs sizes the Go scheduler for a program whose worker
// goroutines each keep an OS thread busy: vipd's dataplane workers and the
// bench's bare AF_XDP forwarder.
//
// A worker locks itself to its thread and holds one P (a scheduler slot,
// GOMAXPROCS of them) nearly all the time, entering the kernel once or
// twice per batch (sendto to transmit, poll when its ring is empty). When
// the workers hold every P, the rest of the program — timers, the admin
// API, health checks, the counters' publisher — can only run by taking a
// worker's P: the runtime's monitor thread retakes it while the worker is
// in a system call and starts another thread to run what waits, and the
// worker waits for a P again when its call returns. Each round trip is
// several context switches on the worker's CPU. With one P more than the
// workers, the rest of the program runs on the spare P and the workers'
// calls are left alone.
//
// Measured on the bench's box-limited rig (one CPU for the box, one
// worker, so GOMAXPROCS defaults to 1): docs/performance-log.md, "One
// spare P, measured".
package procs
