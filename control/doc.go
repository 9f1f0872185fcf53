// Package control is vipd's control plane core: it compiles a validated
// configuration, the health and drain state of every backend and what the
// host tells about its interfaces and neighbors into a dataplane.Spec, and
// keeps the identities that let flows survive a reload.
//
// Conntrack entries name their VIP by a 16-bit ID and their backend by a
// 32-bit reference. The Registry hands these out by identity — a VIP by
// (address, protocol, port), a backend by its VIP and (address, port) — so
// that a reload that keeps a VIP or backend keeps its ID or reference, and
// with them every flow pinned to it. References are never reused while the
// process lives, so a removed backend's stale entries can never point at a
// newcomer.
//
// The package does no I/O and never touches a packet.
package control
