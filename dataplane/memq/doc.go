// Package memq is the in-memory dataplane driver: a dataplane.Queue whose
// wire is a pair of Go channels. Tests inject frames as if they arrived on a
// port and read what the worker transmitted, with no privileges and no
// kernel; the daemon's own tests run the real worker loop over it.
package memq
