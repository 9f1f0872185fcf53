// Package dataplane runs the per-frame pipeline on worker goroutines, one per
// NIC queue, behind a small driver interface (Queue; drivers in afxdp,
// afpacket and the in-memory memq), hands established flows down to the
// XDP fast path (package xdpprog), and keeps the per-worker counters.
// docs/architecture.md tells the data path from driver to transmit, with
// the file for each step.
//
// Workers read an immutable Snapshot, built by NewSnapshot from a Spec the
// control plane compiles and published through an atomic pointer; a worker
// loads it at the start of every batch. The package does not parse
// configuration. NewSnapshotFrom builds the next snapshot from the last
// one, with the same result, rebuilding only the VIPs whose spec changed
// (and their Maglev tables only when their inputs did).
//
// Backend references index the snapshot's backend array and each worker's
// per-backend counters, and conntrack entries store them. The control
// plane reuses a reference only after every entry that could hold it has
// expired (control.Registry), which rests on two rules of the pipeline: a
// conntrack entry whose reference is not live in the worker's snapshot is
// never refreshed (it is re-pinned by SetBackend, or left to expire), and a
// worker forwards by a snapshot at most one batch after a newer one is
// published. A reused reference comes with a new BackendSpec.Epoch, on
// which a worker restarts its counters of that reference (syncCounters).
//
// # The pipeline
//
// Worker.Process takes one frame and gives it one verdict (transmit, reply,
// kernel, relay to another worker, or drop with a counted reason). It does
// no I/O, reads no clock and allocates nothing. Which frames are vipd's at
// all is the steering rule (claims.go), stated once by Snapshot.Claims and
// applied in the kernel by the XDP program (package xdpprog); the pipeline
// gives the kernel verdict to exactly the frames Claims rejects (FuzzProcess
// checks it, and a differential test the XDP program). A frame is, in this
// order:
//
//   - malformed (Parse's checks): dropped when the rule claims it, else
//     the kernel's; claimed IPv4 with a wrong header checksum is dropped;
//   - for a VIP, matched by (destination, protocol, port) with port 0 for
//     every-port VIPs — a first fragment by its ports like a whole packet,
//     a later fragment by (destination, protocol) when one VIP has it —:
//     looked up in the worker's conntrack shard (flow hash over the
//     5-tuple) and, on a miss, given a backend by the VIP's scheduler
//     (sched.go: the weighted Maglev table, 5-tuple or source-address
//     hash, unless the VIP asks for a load-aware one) and pinned; then NAT'd
//     (package nat: destination rewritten, TTL decremented, checksums
//     updated once each) or encapsulated for DSR in the frame's headroom
//     (package dsr: IP in IP, or GUE with the previous-owner hint when the
//     VIP gives one);
//   - to a VIP address but no VIP of its protocol and port: ICMP echo is
//     answered, ICMP errors vipd relays (unreachable, time exceeded,
//     parameter problem; a valid checksum) about a VIP flow are steered to
//     the backend that owns the flow (the reversed quote is the flow key;
//     a worker whose shard does not hold it hands it to the next, relay.go),
//     the rest dropped and counted;
//   - to one of the box's own addresses: the kernel's, never a NAT reply;
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
// the same way. A sample of NAT'ed packets has its transport checksum
// verified and counted (sample.go).
//
// ProcessBatch (batch.go) runs these steps over a whole batch in passes —
// parse and classify every frame, prefetch the tracked flows' conntrack
// buckets and records, then decide frame by frame — and gives each frame
// the verdict Process would (TestBatchAgreesWithProcess).
//
// # The fast path
//
// With a FastPath set (SetFastPath; the daemon's writes the XDP program's
// flow maps), a worker offers each tracked flow past its first packet and
// each NAT backend's reply flow, as it just translated or encapsulated
// one of their packets (fast.go: FastFlow), and flushes the offers after
// the batch was transmitted. From then on the XDP program forwards the
// flow's frames in the kernel, byte for byte as the worker would; what
// changes a flow's state (SYN, FIN, RST) or needs the worker's judgement
// (TTL 1, MTU, options, fragments, GUE over IPv6) still comes here. An
// entry expires after the refresh period, so one packet per flow keeps
// reaching a worker, which renews it in conntrack and in the map; a FIN
// or RST retires it at once. A snapshot that changes how established
// flows are forwarded moves to a new generation (Snapshot.Generation),
// which retires every entry; one that changes only weights or drains
// does not. The packets the program forwards are added to the VIP and
// backend counters by one worker (harvestFast).
//
// # Writing the packet path
//
// Besides allocating nothing and reading no clock, code a frame passes
// through does not assign a struct of more than four fields, or with an
// array field, as a composite literal through a pointer or slice element
// (*f = Frame{...}, descs[i] = Desc{...}): the compiler builds such a
// literal on the stack and copies it in 16-byte moves, and each move's
// load waits for the narrower stores of the fields it spans to reach the
// cache — a failed store-to-load forward, a dozen cycles per frame, which
// no instruction count shows (perf put 62% of packet.ParseCommon's time on
// one such move). Fields are assigned one by one instead (Desc.Set).
//
// # Threading
//
// A Worker, its conntrack shard and its counters belong to one goroutine.
// Other goroutines read counters through Worker.Published (a copy made every
// PublishEvery) and ask for live flows per backend through
// Worker.CountFlows, which the worker serves between batches in bounded
// steps. Two structures are shared by the workers, both lock-free: the
// NeighborCache that remembers on-link clients' MACs, and the Relay whose
// per-worker inboxes carry ICMP errors to the worker holding their flow.
// A third, the LoadBoard, they only read: the control plane publishes on
// it the sum of their live flows per backend for the load-aware
// schedulers, and each worker adds the flows it pinned since.
package dataplane
