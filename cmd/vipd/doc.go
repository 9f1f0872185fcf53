// Command vipd is a userspace L4 load balancer for bare-metal gateway boxes.
//
// It receives frames through AF_XDP (or a raw AF_PACKET socket), steers every
// packet addressed to a virtual IP (VIP) to one backend chosen by a weighted
// Maglev table backed by a connection table, and forwards it either by NAT
// (destination rewrite, replies rewritten back) or by IPIP encapsulation for
// direct server return (DSR).
//
// Usage:
//
//	vipd -config FILE          run the daemon
//	vipd -check -config FILE   validate FILE, print a summary, exit 0 or 1
//	vipd -version              print the version and exit
//
// This package holds only flags, wiring and signal handling; everything a
// test needs to reach lives in the library packages.
package main
