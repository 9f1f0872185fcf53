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
	// DropGUEVariant: a GUE datagram does not start with an IP header
	// (GUE variant 1): it carries a GUE header (variant 0, which vipd
	// never sends) or a reserved variant.
	DropGUEVariant
	// DropWrite: writing to the TUN device failed (the error is counted,
	// not returned, so that one bad packet does not stop the loop).
	DropWrite

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
}

// String returns a short snake_case name, suitable as a metric label.
func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// Stats is a snapshot of a Decap's counters. Every packet read is counted
// in Received and, once handled, in exactly one of Decapsulated or
// Dropped.
type Stats struct {
	Received     uint64 // packets read from the raw and GUE sockets
	GUE          uint64 // of Received, the datagrams read from the GUE sockets
	Decapsulated uint64 // inner packets written to the TUN device
	Bytes        uint64 // bytes of inner packets written to the TUN device
	// Completed counts inner TCP segments that receive offload (GRO) had
	// merged, leaving the checksum partial, and whose checksum was then
	// finished (see the package documentation); they are also counted in
	// Decapsulated.
	Completed uint64
	Dropped   [NumReasons]uint64 // indexed by Reason
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
}

func (c *counters) snapshot() Stats {
	s := Stats{
		Received:     c.received.Load(),
		GUE:          c.gue.Load(),
		Decapsulated: c.decapsulated.Load(),
		Bytes:        c.bytes.Load(),
		Completed:    c.completed.Load(),
	}
	for i := range c.dropped {
		s.Dropped[i] = c.dropped[i].Load()
	}
	return s
}
