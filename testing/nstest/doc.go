// Package nstest gives privileged tests throwaway network namespaces and
// veth pairs. Every name is unique per process and run, everything created
// is deleted in t.Cleanup — by exact name, also when the test fails — and
// tests that need root skip with a clear message when not root (or when
// the kernel refuses root a namespace, in a restricted container).
//
// Code runs inside a namespace with NS.Do (or NS.Go, in the background),
// on a thread of its own that is switched back before any other goroutine
// may use it.
//
// Addresses used with it must come from 198.18.0.0/15 (IPv6 2001:2::/48):
// traffic never leaves the namespaces the test created.
package nstest
