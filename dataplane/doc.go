// Package dataplane runs the per-frame pipeline on worker goroutines, one per
// NIC queue, behind a small driver interface (Queue; drivers in afxdp,
// afpacket and the in-memory memq), and keeps the per-worker counters.
//
// Workers read an immutable Snapshot, built by NewSnapshot from a Spec the
// control plane compiles and published through an atomic pointer; a worker
// loads it at the start of every batch. The package does not parse
// configuration.
//
// # The pipeline
//
// Worker.Process takes one frame and gives it one verdict (transmit, reply,
// kernel, or drop with a counted reason). It does no I/O, reads no clock and
// allocates nothing. A frame is, in this order:
//
//   - malformed (Parse's checks, the IPv4 header checksum): dropped;
//   - for a VIP, matched by (destination, protocol, port) with port 0 for
//     every-port VIPs: looked up in the worker's conntrack shard (flow hash
//     over the 5-tuple) and, on a miss, given a backend by the VIP's weighted
//     Maglev table (5-tuple or source-address hash) and pinned; then NAT'd
//     (destination rewritten, TTL decremented, checksums updated once each)
//     or IPIP-encapsulated for DSR in the frame's headroom;
//   - to a VIP address but no VIP of its protocol and port: ICMP echo is
//     answered, ICMP errors about a VIP flow are steered to the backend that
//     owns the flow (the reversed quote is the flow key), the rest dropped;
//   - a NAT reply, matched by (backend address, protocol, port): the source
//     is rewritten back to the VIP. No connection state is needed — the
//     configuration makes that triple belong to one VIP — which matters
//     because a reply may reach another worker than its flow;
//   - anything else: the kernel's.
//
// Packets that do not fit the egress MTU get ICMP fragmentation-needed or
// Packet Too Big (rate-limited per worker) when they may not be fragmented,
// and are fragmented otherwise. Fragments of one datagram are all hashed on
// (source, destination, protocol) and bypass conntrack, so that they take
// the same way.
//
// # Threading
//
// A Worker, its conntrack shard and its counters belong to one goroutine.
// Other goroutines read counters through Worker.Published (a copy made every
// PublishEvery) and ask for live flows per backend through
// Worker.CountFlows, which the worker serves between batches in bounded
// steps. The NeighborCache that remembers on-link clients' MACs is the one
// structure workers share, and it is lock-free.
package dataplane
