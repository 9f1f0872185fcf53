// Package testbed builds, per run, a network of throwaway namespaces in
// which vipd runs as a user would run it — real kernel interfaces, real TCP
// clients and servers — for the end-to-end tests and `make demo`.
//
// Two-armed layout (the default, matching config.toml.example):
//
//	client 198.18.2.1 ── router ──(198.18.0.0/24)── eth0 [vipd box] eth1 ──┐
//	                       │ 198.18.1.254                      198.18.1.1  │
//	                       └──────────────── switch (198.18.1.0/24) ───────┤
//	                                          backends 198.18.1.11, .12, .13
//
// One-armed layout: the router, the box (eth0 only) and the backends share
// one switch on 198.18.0.0/24.
//
// The VIPs (198.18.0.100 NAT, 198.18.0.101 DSR, 198.18.0.102 UDP NAT) sit
// in the router's box-side subnet, so the router ARPs for them and vipd
// answers. Backends route NAT replies through the box (their default route)
// and DSR replies, whose source is the VIP, straight to the router (a
// source-based rule), and hold the DSR VIP on loopback behind the
// user-space decapsulator (this kernel has no ipip module). The box has IP
// forwarding off, as AF_PACKET mode requires.
//
// Every name is unique per run; every namespace, link and process is
// removed at cleanup, also when a test fails. Addresses are from
// 198.18.0.0/15 only, and traffic never leaves the namespaces.
package testbed
