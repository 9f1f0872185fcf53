// Package control is vipd's control plane core: it compiles a validated
// configuration, the health and drain state of every backend and what the
// host tells about its interfaces and neighbors into a dataplane.Spec, and
// keeps the identities that let flows survive a reload.
//
// Conntrack entries name their VIP by a 16-bit ID and their backend by a
// 32-bit reference. The Registry hands these out by identity — a VIP by
// (address, protocol, port), a backend by its VIP and (address, port) — so
// that a reload that keeps a VIP or backend keeps its ID or reference, and
// with them every flow pinned to it. A removed backend's reference goes to
// another backend only after every conntrack entry that could hold it has
// expired (Registry documents the invariant), so stale entries never point
// at a newcomer, and the arrays indexed by reference stay as large as the
// backends of the last conntrack timeout, however many reloads churn them.
//
// A Plan resolves a configuration's identities once, so that a snapshot
// after a health event compiles only the VIP that changed.
//
// The package does no I/O and never touches a packet.
package control
