// Package afxdp is vipd's AF_XDP driver: one AF_XDP socket per interface
// and NIC queue, presented to a dataplane worker as a dataplane.Queue.
//
// Socket, UMEM and ring creation come from github.com/asavie/xdp (v0.3.3).
// Everything after that is done here, because that library's fast path does
// not fit a forwarder: its GetDescs scans every frame on each call, it never
// uses need-wakeup, and its Complete discards the addresses it completes.
// This package maps the four rings a second time from the socket (the
// kernel allows several mappings of the same ring; they share memory),
// keeps cached producer and consumer indexes to cut atomic operations, and
// owns the frame accounting: a stack of free frames per socket, refilled
// from the completion ring, feeding the fill ring and extra transmissions.
//
// Frame life cycle (each frame is in exactly one place):
//
//	free stack → fill ring → (kernel) → rx ring → worker batch
//	worker batch → tx ring → (kernel) → completion ring → free stack
//	worker batch → free stack                    (dropped, or copied to the other port)
//
// Threading: a Socket and a Queue belong to the single worker goroutine
// that calls Receive and Transmit; only Stats may be called from others.
//
// Received frames start XDP_PACKET_HEADROOM (256) bytes into their UMEM
// frame in copy mode, which leaves the pipeline room to prepend an outer
// IPIP header or build an ICMP reply in place.
package afxdp
