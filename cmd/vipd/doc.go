// Command vipd is a userspace L4 load balancer for bare-metal gateway boxes.
//
// It receives frames through AF_XDP (or a raw AF_PACKET socket), steers every
// packet addressed to a virtual IP (VIP) to one backend chosen by a weighted
// Maglev table backed by a connection table, and forwards it either by NAT
// (destination rewrite, replies rewritten back) or by encapsulation for
// direct server return (DSR: IP in IP, or GUE). Where the NIC's driver has
// native XDP, the XDP program forwards established flows itself (the fast
// path). docs/architecture.md has the data path.
//
// Usage:
//
//	vipd -config FILE          run the daemon
//	vipd -check -config FILE   validate FILE, print a summary, exit 0 or 1
//	vipd -check-host -config FILE   the same, and check this machine has what FILE names
//	vipd reload                reload the file, print what changed or every error
//	vipd -version              print the version and exit
//
// This package holds only flags, wiring and signal handling; everything a
// test needs to reach lives in the library packages.
package main
