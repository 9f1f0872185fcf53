// Package linkwatch is the kernel's view of the box's interfaces through
// rtnetlink (RFC 3549): each link's index, name, MAC, MTU and addresses,
// read once (Read, List, LocalAddrs) or followed (Watch), so that a new
// egress MTU or address reaches the dataplane without a restart.
//
// It is used by package arp (the responder's and resolver's view of the
// links), by the daemon (the interfaces it serves, the box's own addresses)
// and, through the daemon's host view, by the BGP speaker (its default
// router ID and next hops).
//
// # Sockets and network namespaces
//
// Every rtnetlink socket is opened by the goroutine that calls Read,
// LocalAddrs or Watch, never by a goroutine they start: a caller that locked
// its OS thread into a network namespace gets sockets in that namespace.
package linkwatch
