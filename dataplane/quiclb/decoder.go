package quiclb

import (
	"errors"
	"fmt"
)

// QUIC versions whose long-header packet types Route knows. The type field
// (bits 5-4 of the first octet) is numbered differently in the two: RFC 9000
// §17.2 for v1, RFC 9369 §3.2 for v2.
const (
	versionNegotiation = 0x00000000
	version1           = 0x00000001
	version2           = 0x6b3343cf
)

// Decoder routes datagrams by up to NumConfigs codecs, at most one per
// rotation codepoint. It is immutable and shared by all workers.
type Decoder struct {
	codecs [NumConfigs]*Codec
}

// NewDecoder builds a Decoder; two codecs with the same rotation codepoint
// (or a nil codec) are an error.
func NewDecoder(codecs ...*Codec) (*Decoder, error) {
	d := &Decoder{}
	for _, c := range codecs {
		if c == nil {
			return nil, errors.New("quiclb: nil codec")
		}
		rot := c.cfg.Rotation
		if d.codecs[rot] != nil {
			return nil, fmt.Errorf("quiclb: two configurations at rotation %d", rot)
		}
		d.codecs[rot] = c
	}
	return d, nil
}

// Codec returns the codec at a rotation codepoint, nil if none.
func (d *Decoder) Codec(rotation uint8) *Codec {
	if rotation >= NumConfigs {
		return nil
	}
	return d.codecs[rotation]
}

// Verdict is what Route made of a datagram.
type Verdict uint8

const (
	Routable       Verdict = iota // sid[:n] holds the server ID decoded with configuration rot
	NotQUIC                       // empty, or a long header too short for its own fields
	ClientChosen                  // QUIC v1 / v2 Initial or 0-RTT: the client chose the DCID
	FiveTuple                     // rotation bits 0b111
	UnknownConfig                 // no configuration at that codepoint
	ShortCID                      // the DCID (or datagram) is shorter than the configuration's CID
	NoSourceCID                   // RouteSource on a short header (no SCID there)
	UnknownVersion                // a long header of a version other than 1 and 2: who chose the DCID is unknown
)

var verdictNames = [...]string{
	Routable:       "routable",
	NotQUIC:        "not-quic",
	ClientChosen:   "client-chosen",
	FiveTuple:      "five-tuple",
	UnknownConfig:  "unknown-config",
	ShortCID:       "short-cid",
	NoSourceCID:    "no-source-cid",
	UnknownVersion: "unknown-version",
}

func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return fmt.Sprintf("Verdict(%d)", uint8(v))
}

// clientChosen reports whether a long-header packet of a known version is an
// Initial or 0-RTT packet, whose DCID the client picked at random.
func clientChosen(version uint32, first byte) bool {
	typ := first >> 4 & 3
	switch version {
	case version1:
		return typ == 0 || typ == 1 // Initial, 0-RTT
	case version2:
		return typ == 1 || typ == 2 // Initial, 0-RTT
	}
	return false
}

// longHeader parses the invariant fields of a long header (RFC 8999 §5.1):
// first octet, version (4), DCID length (1), DCID. ok is false when the
// datagram is too short for them.
func longHeader(p []byte) (version uint32, dcid []byte, rest []byte, ok bool) {
	if len(p) < 6 {
		return 0, nil, nil, false
	}
	version = uint32(p[1])<<24 | uint32(p[2])<<16 | uint32(p[3])<<8 | uint32(p[4])
	end := 6 + int(p[5])
	if len(p) < end {
		return 0, nil, nil, false
	}
	return version, p[6:end], p[end:], true
}

// Route reads a UDP payload's destination connection ID by the QUIC
// invariants (RFC 8999) and decodes its server ID into sid[:n].
//
// Long header (first bit 1): versions 1 and 2 Initial and 0-RTT are
// ClientChosen, version 0 (version negotiation) is NotQUIC, and the other
// packets of versions 1 and 2 (Handshake; Retry, which a client never
// sends) have their DCID decoded; the DCID must be at least the
// configuration's CIDLen (extra octets are ignored). Every other version is
// UnknownVersion: the invariants do not say which of its packets carry an
// ID the client chose (draft-29's Initial does, with other type bits than
// v2's), and a client-chosen ID that happened to decode would name a
// server at random — a draining or weight-0 one among them. Short
// header (first bit 0): the DCID starts at payload[1] and is as long as the
// CIDLen of the configuration its first octet names.
//
// len(sid) must be at least MaxServerIDLen: Route panics otherwise, whatever
// the payload, so that a short buffer shows up in the first test. It does not
// allocate.
func (d *Decoder) Route(payload, sid []byte, s *Scratch) (rot uint8, n int, v Verdict) {
	_ = sid[MaxServerIDLen-1]
	if len(payload) == 0 {
		return 0, 0, NotQUIC
	}
	if payload[0]&0x80 == 0 {
		return d.decode(payload[1:], sid, s)
	}
	version, dcid, _, ok := longHeader(payload)
	switch {
	case !ok, version == versionNegotiation:
		return 0, 0, NotQUIC
	case version != version1 && version != version2:
		return 0, 0, UnknownVersion
	case clientChosen(version, payload[0]):
		return 0, 0, ClientChosen
	}
	return d.decode(dcid, sid, s)
}

// RouteSource decodes the source connection ID of a long-header packet: a
// server's packet quoted in an ICMP error, whose SCID the server chose (for
// every packet type, Initial included). A short header has no SCID
// (NoSourceCID). Quoted packets are often cut short: the SCID is decoded
// when at least the configuration's CIDLen octets of it survive, and a
// packet cut before that is NotQUIC or ShortCID, never a panic. Same sid
// precondition as Route; it does not allocate.
func (d *Decoder) RouteSource(payload, sid []byte, s *Scratch) (rot uint8, n int, v Verdict) {
	_ = sid[MaxServerIDLen-1]
	if len(payload) == 0 {
		return 0, 0, NotQUIC
	}
	if payload[0]&0x80 == 0 {
		return 0, 0, NoSourceCID
	}
	version, _, rest, ok := longHeader(payload)
	if !ok || version == versionNegotiation || len(rest) == 0 {
		return 0, 0, NotQUIC
	}
	scid := rest[1:]
	if l := int(rest[0]); l < len(scid) {
		scid = scid[:l]
	}
	// Otherwise the packet was cut inside the SCID (or right at its end):
	// decode what is left, which suffices when the configuration's CID fits
	// in it. decode checks that; scid is never longer than declared, so a
	// declared length below CIDLen is ShortCID too.
	return d.decode(scid, sid, s)
}

// decode routes one connection ID (which may be longer than the
// configuration's CID).
func (d *Decoder) decode(cid, sid []byte, s *Scratch) (rot uint8, n int, v Verdict) {
	if len(cid) == 0 {
		return 0, 0, ShortCID
	}
	rot = cid[0] >> 5
	if rot == Unroutable {
		return rot, 0, FiveTuple
	}
	c := d.codecs[rot]
	if c == nil {
		return rot, 0, UnknownConfig
	}
	if !c.ServerID(sid, cid, s) {
		return rot, 0, ShortCID
	}
	return rot, c.sidLen, Routable
}
