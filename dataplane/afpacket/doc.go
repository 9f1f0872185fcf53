// Package afpacket is vipd's fallback driver for NICs or kernels without
// XDP: raw AF_PACKET sockets with memory-mapped TPACKET_V2 rings, presented
// to a worker as a dataplane.Queue.
//
// Each worker has, per interface, one receive socket — a member of a
// PACKET_FANOUT_HASH group, so that all packets of a flow reach the same
// worker — and one transmit socket with a PACKET_TX_RING flushed by one
// sendto per batch (PACKET_QDISC_BYPASS). Received frames are processed in
// place in the receive ring; PACKET_RESERVE leaves the pipeline its
// headroom in front of each one. The kernel strips VLAN tags into the ring
// header; they are put back into the frame before the pipeline sees it.
//
// Unlike AF_XDP, a packet socket receives copies: the kernel still gets
// every frame. That is why vipd refuses to start in this mode unless the
// host is set up so that the kernel drops what vipd forwards (see
// CheckHost): IP forwarding off, and no VIP assigned to a local interface.
// Otherwise the kernel would also forward or answer the same packets.
// Frames the pipeline hands to the kernel need no action: it has them.
//
// Threading: a Queue belongs to the worker goroutine that calls Receive and
// Transmit; Stats may be called from any goroutine.
package afpacket
