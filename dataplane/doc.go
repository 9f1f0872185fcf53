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
// checks it, and a differential test the XDP program). A malformed frame
// (Parse's checks) is dropped when the rule claims it and the kernel's
// otherwise; a claimed IPv4 packet with a wrong header checksum is
// dropped. What happens to the rest — VIP lookup, conntrack, scheduling,
// NAT or DSR, MTU, NAT replies without connection state, ICMP errors
// steered to their flow's worker — is told step by step, with the file
// for each, in docs/architecture.md, "The data path, step by step"; what
// an operator sees of it (fragments, MTU, the drop reasons) in
// docs/configuration.md, "NAT and DSR".
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
// the batch was transmitted. The program then forwards the flow's frames
// byte for byte as the worker would; a snapshot that changes how
// established flows are forwarded moves to a new generation
// (Snapshot.Generation), which retires every entry. The packets the
// program forwards are added to the VIP and backend counters by one
// worker (harvestFast). When flows are handed down, renewed and retired:
// docs/operations.md, "The XDP fast path".
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
