// Package arp answers ARP requests for VIPs (RFC 826), announces VIPs with
// gratuitous ARP (RFC 5227) and resolves next-hop MAC addresses for backends
// from the kernel's routing and neighbor tables (rtnetlink), falling back to
// ARP requests. It runs off the packet path and publishes what it learns into
// the dataplane snapshot; it never blocks a worker.
package arp
