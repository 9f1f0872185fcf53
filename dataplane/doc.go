// Package dataplane runs the per-frame pipeline on worker goroutines, one per
// NIC queue, behind small I/O driver interfaces (AF_XDP with an XDP steering
// program, AF_PACKET, and an in-memory driver for tests), and keeps the
// per-worker counters.
//
// Workers read an immutable snapshot published by the control plane through
// an atomic pointer at the start of every batch. The package does not parse
// configuration.
package dataplane
