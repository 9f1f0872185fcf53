// Package nstest gives privileged tests throwaway network namespaces and
// veth pairs. Every name is unique per process and run, everything created
// is deleted in t.Cleanup — by exact name, also when the test fails — and
// tests that need root skip with a clear message when not root.
//
// Addresses used with it must come from 198.18.0.0/15 (IPv6 2001:2::/48):
// traffic never leaves the namespaces the test created.
package nstest
