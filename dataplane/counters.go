package dataplane

// Verdict is what the pipeline decided for a frame.
type Verdict uint8

const (
	// VerdictDrop: the frame is discarded; Desc.Reason says why.
	VerdictDrop Verdict = iota
	// VerdictTX: transmit the (rewritten) frame on Desc.Port.
	VerdictTX
	// VerdictReply: transmit vipd's answer (an ICMP message built in the
	// frame) on Desc.Port, back where the frame came from.
	VerdictReply
	// VerdictKernel: not vipd's business (ARP, the box's own traffic):
	// hand the untouched frame to the kernel.
	VerdictKernel
	// VerdictRelay: a copy went to another worker (an ICMP error about a
	// flow this worker does not hold, see relay.go); recycle the frame.
	VerdictRelay
	numVerdicts
)

var verdictNames = [numVerdicts]string{"drop", "tx", "reply", "kernel", "relay"}

func (v Verdict) String() string {
	if v < numVerdicts {
		return verdictNames[v]
	}
	return "unknown"
}

// DropReason says why a frame was dropped. Every drop has one, and each
// reason has its own counter.
type DropReason uint8

const (
	DropNone            DropReason = iota
	DropTruncated                  // a header runs past the frame
	DropBadIPHeader                // bad version, IHL or length fields
	DropBadIPChecksum              // IPv4 header checksum wrong (RFC 1812 §5.2.2)
	DropBadL4                      // bad TCP offset, UDP length, ICMP size
	DropBadFragment                // overlapping TCP fragment (RFC 1858)
	DropExtHeaders                 // IPv6 extension chain too long or malformed
	DropTTLExceeded                // TTL or hop limit would reach 0
	DropSrcIsVIP                   // spoofed: a VIP address as source
	DropVIPProto                   // to a VIP address, a protocol no VIP serves
	DropVIPPort                    // to a VIP address, a port no VIP serves
	DropNoBackend                  // the VIP has no backend up
	DropFragAmbiguous              // a non-first fragment for an address with several VIPs of its protocol
	DropTooBig                     // does not fit the egress MTU (an ICMP error was sent or rate-limited)
	DropNoHeadroom                 // the frame has no room to prepend headers
	DropNoNeighbor                 // next-hop MAC not resolved yet
	DropICMPUnmatched              // an ICMP error for a VIP whose quote names no flow
	DropNoTxFrame                  // no free frame to emit a fragment
	DropICMPRateLimited            // an echo reply vipd would send exceeds the ICMP rate limit
	DropICMPType                   // ICMP to a VIP that vipd neither answers nor relays (redirect, source quench, a fragment, ...)
	DropBadICMPChecksum            // an ICMP error vipd would relay has a wrong checksum
	DropSourceRoute                // to a VIP, a source route with addresses left: the VIP is a waypoint
	numDropReasons
)

var dropNames = [numDropReasons]string{
	"none", "truncated", "bad_ip_header", "bad_ip_checksum", "bad_l4", "bad_fragment",
	"ext_headers", "ttl_exceeded", "src_is_vip", "vip_proto", "vip_port", "no_backend",
	"frag_ambiguous", "too_big", "no_headroom", "no_neighbor", "icmp_unmatched", "no_tx_frame",
	"icmp_rate_limited", "icmp_type", "bad_icmp_checksum", "source_route",
}

func (r DropReason) String() string {
	if r < numDropReasons {
		return dropNames[r]
	}
	return "unknown"
}

// DropReasons lists every reason, for exporters.
func DropReasons() []DropReason {
	rs := make([]DropReason, 0, numDropReasons-1)
	for r := DropTruncated; r < numDropReasons; r++ {
		rs = append(rs, r)
	}
	return rs
}

// FlowCounters count one VIP's or backend's traffic. A VIP's counts are
// the sums of its backends' (but for the NAT replies that are later
// fragments, whose backend is not known: the VIP's alone).
type FlowCounters struct {
	// Packets and Bytes (IP bytes as received) are the clients' packets
	// sent on to the backend (ipvsadm's InPkts and InBytes); OutPackets
	// and OutBytes the NAT backend's replies relayed to its clients
	// (OutPkts and OutBytes). A DSR backend's replies bypass vipd: its
	// Out counts stay 0, and readers say they are not seen.
	Packets    uint64
	Bytes      uint64
	OutPackets uint64
	OutBytes   uint64
	NewFlows   uint64 // flows first pinned here (conntrack insert or stateless pick)
	// Handshakes are tracked TCP flows that began with a SYN, and Answered
	// the answers to them: in NAT mode the backend's SYN-ACKs relayed to
	// the client (retransmissions too), in DSR mode the flows whose client
	// went on past its SYNs (handshake.go). A handshake the backend
	// ignores or resets stays unanswered: passive outlier detection and
	// the handshake verdict read the ratio. A VIP's are its backends'.
	Handshakes uint64
	Answered   uint64
	// HandshakeTime is the histogram of the answered handshakes' times,
	// bucket i counting those of at most HandshakeBuckets[i] (the last,
	// the slower ones), and HandshakeNanos their sum. Backends only.
	HandshakeTime  [numHandshakeBuckets]uint64
	HandshakeNanos uint64
}

// Counters are one worker's counters. The worker owns them and writes them
// without synchronization; readers on other goroutines use Worker.Published.
type Counters struct {
	RxFrames uint64
	RxBytes  uint64
	Verdicts [numVerdicts]uint64
	Drops    [numDropReasons]uint64
	// ICMP messages vipd sent (frag-needed, packet too big, echo replies)
	// and those it suppressed by rate limit.
	ICMPSent        uint64
	ICMPRateLimited uint64
	// ICMP errors steered to the backend that owns the flow.
	ICMPSteered uint64
	// ICMP errors about flows this worker does not hold, handed on to the
	// next worker (ICMPRelayed), received from another worker
	// (ICMPRelayedIn), and steered by Maglev because the next worker's
	// inbox was full or the frame too big for it (ICMPNotRelayed).
	ICMPRelayed    uint64
	ICMPRelayedIn  uint64
	ICMPNotRelayed uint64
	// Fragments vipd made from packets whose DF bit was clear.
	FragmentsOut uint64
	// NAT replies translated back to the VIP.
	Replies uint64
	// Transport checksums verified on a sample of NAT'ed packets, and
	// those found wrong (sample.go): the trace of senders with TX
	// checksum offload on a veth or tap.
	L4ChecksumSampled uint64
	L4ChecksumBad     uint64
	// Conntrack outcomes on the packet path.
	FlowHits   uint64
	FlowMisses uint64
	Untracked  uint64 // new flows the table had no room for (forwarded statelessly)
	Repicked   uint64 // flows moved off a backend that went down or away
	// Reused counts SYNs of a new connection on the tuple of a flow
	// whose backend takes no new flows (draining, weight 0, down,
	// disabled, removed): placed as new flows rather than kept there.
	Reused    uint64
	Stateless uint64 // packets forwarded by Maglev alone (fragments, untracked flows)
	// Previous-owner hints (VIPSpec.Previous): flows that missed the
	// table mid-stream and were given one, and packets sent with one.
	HintedFlows   uint64
	HintedPackets uint64
	// QUIC-LB (quic.go): packets routed by the server ID in their
	// connection ID, those whose connection-table entry moved to that
	// server from another backend, ICMP errors steered by the quoted
	// packet's source connection ID, and, by reason, the packets of
	// QUIC-LB VIPs (and quoted ones) that fell back to the connection
	// table and the scheduler.
	QUICRouted     uint64
	QUICMoved      uint64
	QUICICMPRouted uint64
	QUICFallbacks  [numQUICFallbacks]uint64
	// Flows offered to the fast path (FastPath.Offer took them), and
	// flushes of offered flows that failed.
	FastOffered uint64
	// FastRetired counts the ends of flows (FIN, RST) passed to the fast
	// path (FastFlow.Retire).
	FastRetired     uint64
	FastFlushErrors uint64
	Batches         uint64
	BatchFrames     uint64
	// BatchSizes is a histogram of frames per batch: bucket i counts
	// batches of at most 2^i frames (the last bucket, more).
	BatchSizes [12]uint64
	// Per VIP (by VIP ID) and per backend (by ref).
	VIPs     []FlowCounters
	Backends []FlowCounters
}

// add accumulates o into c.
func (c *Counters) add(o *Counters) {
	c.RxFrames += o.RxFrames
	c.RxBytes += o.RxBytes
	for i := range c.Verdicts {
		c.Verdicts[i] += o.Verdicts[i]
	}
	for i := range c.Drops {
		c.Drops[i] += o.Drops[i]
	}
	c.ICMPSent += o.ICMPSent
	c.ICMPRateLimited += o.ICMPRateLimited
	c.ICMPSteered += o.ICMPSteered
	c.ICMPRelayed += o.ICMPRelayed
	c.ICMPRelayedIn += o.ICMPRelayedIn
	c.ICMPNotRelayed += o.ICMPNotRelayed
	c.FragmentsOut += o.FragmentsOut
	c.Replies += o.Replies
	c.L4ChecksumSampled += o.L4ChecksumSampled
	c.FastOffered += o.FastOffered
	c.FastFlushErrors += o.FastFlushErrors
	c.L4ChecksumBad += o.L4ChecksumBad
	c.FlowHits += o.FlowHits
	c.FlowMisses += o.FlowMisses
	c.Untracked += o.Untracked
	c.Repicked += o.Repicked
	c.Reused += o.Reused
	c.FastRetired += o.FastRetired
	c.Stateless += o.Stateless
	c.HintedFlows += o.HintedFlows
	c.HintedPackets += o.HintedPackets
	c.QUICRouted += o.QUICRouted
	c.QUICMoved += o.QUICMoved
	c.QUICICMPRouted += o.QUICICMPRouted
	for i := range c.QUICFallbacks {
		c.QUICFallbacks[i] += o.QUICFallbacks[i]
	}
	c.Batches += o.Batches
	c.BatchFrames += o.BatchFrames
	for i := range c.BatchSizes {
		c.BatchSizes[i] += o.BatchSizes[i]
	}
	c.VIPs = addFlows(c.VIPs, o.VIPs)
	c.Backends = addFlows(c.Backends, o.Backends)
}

func addFlows(dst, src []FlowCounters) []FlowCounters {
	for len(dst) < len(src) {
		dst = append(dst, FlowCounters{})
	}
	for i := range src {
		dst[i].Packets += src[i].Packets
		dst[i].Bytes += src[i].Bytes
		dst[i].OutPackets += src[i].OutPackets
		dst[i].OutBytes += src[i].OutBytes
		dst[i].NewFlows += src[i].NewFlows
		dst[i].Handshakes += src[i].Handshakes
		dst[i].Answered += src[i].Answered
		for j := range dst[i].HandshakeTime {
			dst[i].HandshakeTime[j] += src[i].HandshakeTime[j]
		}
		dst[i].HandshakeNanos += src[i].HandshakeNanos
	}
	return dst
}

// clone returns a deep copy.
func (c *Counters) clone() *Counters {
	d := *c
	d.VIPs = append([]FlowCounters(nil), c.VIPs...)
	d.Backends = append([]FlowCounters(nil), c.Backends...)
	return &d
}

// Sum adds up several workers' counters.
func Sum(cs ...*Counters) *Counters {
	var t Counters
	for _, c := range cs {
		if c != nil {
			t.add(c)
		}
	}
	return &t
}
