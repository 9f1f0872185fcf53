package decap

import "sync/atomic"

// Reason says why a packet was dropped.
type Reason uint8

const (
	// DropMalformed: the outer IPv4 header is truncated or inconsistent
	// (version, header length, total length against what was read), or a
	// GUE datagram is empty.
	DropMalformed Reason = iota
	// DropProtocol: the outer protocol is not 4 (IPv4 in IPv4). The raw
	// socket only delivers protocol 4; this guards the parser, not the
	// network.
	DropProtocol
	// DropSource: the outer source is not in Options.AllowedSources.
	DropSource
	// DropInnerVersion: the inner packet is not IPv4 in an IPv4 tunnel, or
	// not IPv6 in an IPv6 tunnel (4in6 and 6in4 are not supported, over
	// IPIP or GUE).
	DropInnerVersion
	// DropInnerLength: the inner header is truncated, or its length
	// fields do not add up to exactly the bytes left after the outer header.
	DropInnerLength
	// DropInnerChecksum: the inner IPv4 header checksum is wrong. The
	// kernel would drop it silently after the TUN; counting it here makes
	// the drop visible.
	DropInnerChecksum
	// DropNotLocal: Options.CheckLocal is set and the inner destination is
	// not an address of this host.
	DropNotLocal
	// DropMergedUDP: receive offload (GRO) merged UDP datagrams into one
	// packet, which cannot be split again here (see completeChecksum).
	DropMergedUDP
	// DropGUEVariant: a GUE datagram is of a reserved variant (its first
	// two bits are 10 or 11): neither an IP header (variant 1) nor a GUE
	// header (variant 0).
	DropGUEVariant
	// DropWrite: writing to the TUN device failed (the error is counted,
	// not returned, so that one bad packet does not stop the loop).
	DropWrite
	// DropGUEHeader: a GUE header (variant 0) that is not the one vipd
	// sends with a previous-owner hint: a control message (C bit), flags
	// set, a Proto/ctype other than 4 or 41, an Hlen other than 2 (IPv4)
	// or 5 (IPv6) for it, a datagram that ends inside the header, or an
	// inner packet whose version is not the one Proto/ctype names.
	DropGUEHeader
	// DropHint: a GUE header's private data is not vipd's previous-owner
	// hint (magic "vp", kind 1), sets an unknown hint flag, or names a
	// previous owner that no packet can be sent to (unspecified,
	// loopback, multicast, link-local, broadcast, IPv4-mapped).
	DropHint
	// DropChainSend: sending a packet on to its previous owner failed
	// (the error is counted; TCP retransmits).
	DropChainSend
	// DropChainTarget: a hinted packet that would be chained names a
	// previous owner outside Options.ChainPeers. It is not sent there:
	// the hint is the packet's own word, and chaining to any address
	// would make this host a reflector. A misconfiguration shows here
	// too: vipd knows a backend that ChainPeers lacks.
	DropChainTarget

	// NumReasons is the number of drop reasons, the length of
	// Stats.Dropped.
	NumReasons
)

var reasonNames = [NumReasons]string{
	DropMalformed:     "malformed",
	DropProtocol:      "protocol",
	DropSource:        "source",
	DropInnerVersion:  "inner_version",
	DropInnerLength:   "inner_length",
	DropInnerChecksum: "inner_checksum",
	DropNotLocal:      "not_local",
	DropMergedUDP:     "merged_udp",
	DropGUEVariant:    "gue_variant",
	DropWrite:         "write",
	DropGUEHeader:     "gue_header",
	DropHint:          "hint",
	DropChainSend:     "chain_send",
	DropChainTarget:   "chain_target",
}

// String returns a short snake_case name, suitable as a metric label.
func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// HintOutcome says what became of a packet with a previous-owner hint
// (docs/decap.md, "Previous-owner hints at the backend", gives the order
// in which they are decided).
type HintOutcome uint8

const (
	// HintMatch: delivered, a local socket is connected to the inner
	// packet's source (or the decision cache said so).
	HintMatch HintOutcome = iota
	// HintSYN: delivered, a connection start (TCP SYN without ACK).
	HintSYN
	// HintChainedIn: delivered, another backend chained it here
	// (HintChained set); it is never chained again.
	HintChainedIn
	// HintLookupError: delivered, the socket lookup failed; a broken
	// lookup must not black-hole traffic.
	HintLookupError
	// HintOff: delivered as if it had no hint, Options.Chain is off.
	HintOff
	// HintNoPorts: delivered, the inner packet has no ports to look up
	// (not TCP or UDP, a fragment, IPv6 extension headers).
	HintNoPorts
	// HintChainedOut: re-encapsulated with HintChained set and sent to
	// the previous owner.
	HintChainedOut

	// NumHintOutcomes is the length of Stats.Hints.
	NumHintOutcomes
)

var hintNames = [NumHintOutcomes]string{
	HintMatch:       "match",
	HintSYN:         "syn",
	HintChainedIn:   "chained_in",
	HintLookupError: "lookup_error",
	HintOff:         "chaining_off",
	HintNoPorts:     "no_ports",
	HintChainedOut:  "chained_out",
}

// String returns a short snake_case name, suitable as a metric label.
func (o HintOutcome) String() string {
	if o < NumHintOutcomes {
		return hintNames[o]
	}
	return "unknown"
}

// Stats is a snapshot of a Decap's counters. Every packet read is counted
// in Received and, once handled, in exactly one of Decapsulated,
// Hints[HintChainedOut] or Dropped.
type Stats struct {
	Received     uint64 // packets read from the raw and GUE sockets
	GUE          uint64 // of Received, the datagrams read from the GUE sockets
	Decapsulated uint64 // inner packets written to the TUN device
	Bytes        uint64 // bytes of inner packets written to the TUN device
	// Completed counts inner TCP segments that receive offload (GRO) had
	// merged, leaving the checksum partial, and whose checksum was then
	// finished (docs/decap.md, "Receive offload"). The checksum is finished
	// before delivery: such a segment is then counted in Decapsulated,
	// or, when its hint sends it on, as chained, or as a write drop.
	Completed uint64
	Dropped   [NumReasons]uint64 // indexed by Reason

	// Hinted counts the GUE datagrams with a well-formed previous-owner
	// hint; each is counted in one of Hints or, when its previous owner
	// is not a chain peer, Dropped[DropChainTarget], or, when sending it
	// on failed, Dropped[DropChainSend]. The delivered ones are also
	// counted in Decapsulated (or Dropped[DropWrite]).
	Hinted uint64
	Hints  [NumHintOutcomes]uint64 // indexed by HintOutcome
	// Lookups counts the kernel socket lookups made for hinted packets;
	// CacheHits the hinted packets decided by the decision cache instead.
	Lookups   uint64
	CacheHits uint64
}

// TotalDropped returns the sum of Dropped.
func (s Stats) TotalDropped() uint64 {
	var n uint64
	for _, v := range s.Dropped {
		n += v
	}
	return n
}

// counters are the live counters behind Stats. They are shared by the
// receive goroutines (one per socket) and read from any goroutine.
type counters struct {
	received     atomic.Uint64
	gue          atomic.Uint64
	decapsulated atomic.Uint64
	bytes        atomic.Uint64
	completed    atomic.Uint64
	dropped      [NumReasons]atomic.Uint64
	hinted       atomic.Uint64
	hints        [NumHintOutcomes]atomic.Uint64
	lookups      atomic.Uint64
	cacheHits    atomic.Uint64
}

func (c *counters) snapshot() Stats {
	s := Stats{
		Received:     c.received.Load(),
		GUE:          c.gue.Load(),
		Decapsulated: c.decapsulated.Load(),
		Bytes:        c.bytes.Load(),
		Completed:    c.completed.Load(),
		Hinted:       c.hinted.Load(),
		Lookups:      c.lookups.Load(),
		CacheHits:    c.cacheHits.Load(),
	}
	for i := range c.dropped {
		s.Dropped[i] = c.dropped[i].Load()
	}
	for i := range c.hints {
		s.Hints[i] = c.hints[i].Load()
	}
	return s
}
