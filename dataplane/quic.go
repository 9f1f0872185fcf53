package dataplane

import (
	"fmt"

	"github.com/vipd/vipd/dataplane/quiclb"
	"github.com/vipd/vipd/packet"
)

// QUIC-LB (draft-ietf-quic-load-balancers): a VIP's backends encode a
// server ID in the connection IDs they issue, and the worker decodes it
// from each client packet's destination connection ID. A routable ID that
// names a backend keeping flows (up or draining) decides the packet's
// backend ahead of the connection table, and the table's entry follows
// it: a client that changed address or port, whose new tuple no table
// knows, and a box that never saw the connection, both send it to its
// server, with no state shared. Everything else (the client-chosen IDs of
// Initial and 0-RTT packets, long headers of versions other than 1 and 2,
// whose IDs may be the client's too, IDs of an unknown configuration or server,
// servers that are down or gone) takes the path of any UDP packet: the
// connection table, then the scheduler, as the draft's fallback requires.

// quicVIP is a VIP's QUIC-LB routing in a snapshot.
type quicVIP struct {
	spec *QUICSpec // as given: the same pointer, the same routing
	dec  *quiclb.Decoder
	// ids maps, per configuration, a server ID's octets to the backend
	// ref it names. A Go map: a lookup with string(bytes) of a worker's
	// buffer does not allocate, and server IDs are up to 15 octets.
	ids [quiclb.NumConfigs]map[string]uint32
}

// quicScratch is a worker's buffers for decoding, and its memo: the last
// short-header connection ID that decoded routable, by which decoder, and
// to what. A burst of one connection's packets (a batch holds many) then
// pays one decode (up to four AES passes) and a compare per packet after
// it. Decoding is a pure function of the decoder and the ID, so the memo
// needs no invalidation beyond the decoder's identity.
type quicScratch struct {
	sid [quiclb.MaxServerIDLen]byte
	s   quiclb.Scratch

	memoDec *quiclb.Decoder
	memoCID [quiclb.MaxCIDLen]byte
	memoLen int
	memoRot uint8
	memoN   int
	memoSID [quiclb.MaxServerIDLen]byte
}

// route is q's decoder's Route of payload into w.quic.sid, through the
// memo for short headers.
func (sc *quicScratch) route(dec *quiclb.Decoder, payload []byte) (uint8, int, quiclb.Verdict) {
	if len(payload) < 2 || payload[0]&0x80 != 0 {
		return dec.Route(payload, sc.sid[:], &sc.s)
	}
	c := dec.Codec(payload[1] >> 5)
	if c == nil || len(payload) < 1+c.CIDLen() {
		return dec.Route(payload, sc.sid[:], &sc.s)
	}
	l := c.CIDLen()
	cid := payload[1 : 1+l]
	if sc.memoDec == dec && sc.memoLen == l && string(cid) == string(sc.memoCID[:l]) {
		copy(sc.sid[:], sc.memoSID[:sc.memoN])
		return sc.memoRot, sc.memoN, quiclb.Routable
	}
	rot, n, v := dec.Route(payload, sc.sid[:], &sc.s)
	if v == quiclb.Routable && l <= len(sc.memoCID) && n <= len(sc.memoSID) {
		sc.memoDec, sc.memoLen, sc.memoRot, sc.memoN = dec, l, rot, n
		copy(sc.memoCID[:], cid)
		copy(sc.memoSID[:], sc.sid[:n])
	}
	return rot, n, v
}

// QUICFallback says why a packet for a QUIC-LB VIP was not routed by its
// connection ID but by the connection table and the scheduler.
type QUICFallback uint8

const (
	QUICFallbackNone           QUICFallback = iota
	QUICFallbackNotQUIC                     // no QUIC header there (empty, truncated long header, version negotiation)
	QUICFallbackClientChosen                // an Initial or 0-RTT packet: the client chose the ID
	QUICFallbackFiveTuple                   // configuration 0b111: the server asks for 4-tuple routing
	QUICFallbackUnknownConfig               // no configuration at the ID's codepoint
	QUICFallbackShortCID                    // the ID is shorter than its configuration's
	QUICFallbackNoSourceCID                 // an ICMP error quoting a short header: no server-chosen ID there
	QUICFallbackUnknownServer               // the server ID names no backend of the VIP
	QUICFallbackServerDown                  // it names a backend that is down
	QUICFallbackUnknownVersion              // a long header of a version other than 1 and 2: the client may have chosen the ID
	numQUICFallbacks
)

var quicFallbackNames = [numQUICFallbacks]string{
	"none", "not_quic", "client_chosen", "five_tuple", "unknown_config", "short_cid",
	"no_source_cid", "unknown_server", "server_down", "unknown_version",
}

func (r QUICFallback) String() string {
	if r < numQUICFallbacks {
		return quicFallbackNames[r]
	}
	return "unknown"
}

// QUICFallbacks lists every reason, for exporters.
func QUICFallbacks() []QUICFallback {
	rs := make([]QUICFallback, 0, numQUICFallbacks-1)
	for r := QUICFallbackNotQUIC; r < numQUICFallbacks; r++ {
		rs = append(rs, r)
	}
	return rs
}

// quicFallbackOf maps the decoder's verdicts to reasons.
var quicFallbackOf = [...]QUICFallback{
	quiclb.Routable:       QUICFallbackNone,
	quiclb.NotQUIC:        QUICFallbackNotQUIC,
	quiclb.ClientChosen:   QUICFallbackClientChosen,
	quiclb.FiveTuple:      QUICFallbackFiveTuple,
	quiclb.UnknownConfig:  QUICFallbackUnknownConfig,
	quiclb.ShortCID:       QUICFallbackShortCID,
	quiclb.NoSourceCID:    QUICFallbackNoSourceCID,
	quiclb.UnknownVersion: QUICFallbackUnknownVersion,
}

func fallbackOf(v quiclb.Verdict) QUICFallback {
	if int(v) < len(quicFallbackOf) {
		return quicFallbackOf[v]
	}
	return QUICFallbackNotQUIC
}

// setQUIC gives v its QUIC-LB routing from vs.QUIC, prev's when the spec
// is the very one prev's VIP of the same ID was built from.
func (s *Snapshot) setQUIC(vs *VIPSpec, v *vip, prev *Snapshot) error {
	v.quic = nil
	q := vs.QUIC
	if q == nil {
		return nil
	}
	if prev != nil {
		if j, ok := prev.byID[vs.ID]; ok && prev.vips[j].quic != nil && prev.vips[j].quic.spec == q {
			v.quic = prev.vips[j].quic
			return nil
		}
	}
	if vs.Proto != packet.ProtoUDP {
		return fmt.Errorf("%w: VIP %q: QUIC-LB needs a UDP VIP", ErrSpec, vs.Name)
	}
	if q.Decoder == nil {
		return fmt.Errorf("%w: VIP %q: QUIC-LB without a decoder", ErrSpec, vs.Name)
	}
	refs := make(map[uint32]bool, len(vs.Backends))
	for _, b := range vs.Backends {
		refs[b.Ref] = true
	}
	qv := &quicVIP{spec: q, dec: q.Decoder}
	for _, sv := range q.Servers {
		if !refs[sv.Ref] {
			return fmt.Errorf("%w: VIP %q: server ID of ref %d, no backend of the VIP", ErrSpec, vs.Name, sv.Ref)
		}
		c := q.Decoder.Codec(sv.Rotation)
		if c == nil {
			return fmt.Errorf("%w: VIP %q: server ID for configuration %d, which the VIP does not have", ErrSpec, vs.Name, sv.Rotation)
		}
		if len(sv.ID) != c.Config().ServerIDLen {
			return fmt.Errorf("%w: VIP %q: server ID of %d octets for configuration %d, whose IDs have %d", ErrSpec, vs.Name, len(sv.ID), sv.Rotation, c.Config().ServerIDLen)
		}
		m := qv.ids[sv.Rotation]
		if m == nil {
			m = make(map[string]uint32)
			qv.ids[sv.Rotation] = m
		}
		if _, dup := m[sv.ID]; dup {
			return fmt.Errorf("%w: VIP %q: server ID %x of configuration %d given twice", ErrSpec, vs.Name, sv.ID, sv.Rotation)
		}
		m[sv.ID] = sv.Ref
	}
	v.quic = qv
	return nil
}

// udpPayload returns the UDP payload of p (not a fragment), nil if the
// packet is too short for a UDP header.
func udpPayload(p *pkt) []byte {
	o := p.f.L4Off - p.f.L3Off + packet.UDPSize
	if o > len(p.l3) {
		return nil
	}
	return p.l3[o:]
}

// quicServer decodes payload, a QUIC packet's UDP payload for QUIC-LB VIP
// vi, by its destination connection ID (source, for one quoted in an ICMP
// error: a server's long header carries the server's ID there) and
// returns the backend the ID names when that backend keeps flows;
// otherwise nil and why.
func (w *Worker) quicServer(q *quicVIP, payload []byte, source bool, vi int) (*backend, uint32, QUICFallback) {
	sc := &w.quic
	var rot uint8
	var n int
	var v quiclb.Verdict
	if source {
		rot, n, v = q.dec.RouteSource(payload, sc.sid[:], &sc.s)
	} else {
		rot, n, v = sc.route(q.dec, payload)
	}
	if v != quiclb.Routable {
		return nil, 0, fallbackOf(v)
	}
	if int(rot) >= len(q.ids) || n > len(sc.sid) {
		return nil, 0, QUICFallbackUnknownConfig
	}
	ref, ok := q.ids[rot][string(sc.sid[:n])]
	if !ok {
		return nil, 0, QUICFallbackUnknownServer
	}
	b := w.snap.backendFor(ref, vi)
	if b == nil {
		return nil, 0, QUICFallbackServerDown
	}
	return b, ref, QUICFallbackNone
}

// trackQUIC is track's first step for a packet p of QUIC-LB VIP vi: when
// its connection ID routes it, it returns that backend, with the flow's
// connection-table entry pinned there (inserted, or moved from another
// backend); ok is false when the packet falls back to track's path.
func (w *Worker) trackQUIC(p *pkt, flags uint8, vi int, v *vip) (b *backend, ref uint32, ok bool) {
	b, ref, why := w.quicServer(v.quic, udpPayload(p), false, vi)
	if b == nil {
		w.c.QUICFallbacks[why]++
		return nil, 0, false
	}
	w.c.QUICRouted++
	if e, hit := w.lookup(p); hit {
		w.c.FlowHits++
		if e.Backend() != ref {
			// The tuple was another backend's: a client that reused it,
			// or a flow the fallback placed before its server's ID
			// was seen. The server is right: the entry is renewed for
			// it (its age and proof are the old flow's no more), and
			// the fast path, if it carries the tuple, must forget the
			// old backend.
			w.ct.Renew(e, ref, flags, 0)
			w.c.QUICMoved++
			w.c.Backends[ref].NewFlows++
			if w.fast != nil {
				w.retireFast(p, v)
			}
		}
		w.lastState = e.State()
		w.ct.Touch(e, flags)
		return b, ref, true
	}
	w.c.FlowMisses++
	w.lastState = 0
	if _, res := w.ct.InsertMissed(&p.key, p.loc, ref, flags); !res.Tracked() {
		w.c.Untracked++ // routed by its ID all the same: no state needed
	}
	w.c.VIPs[v.id].NewFlows++
	w.c.Backends[ref].NewFlows++
	return b, ref, true
}

// quicOwner is owner's first step for an ICMP error quoting a UDP packet
// of QUIC-LB VIP vi, whose UDP payload (as quoted, perhaps cut short) is
// payload: the backend the quoted packet's source connection ID names, or
// nil.
func (w *Worker) quicOwner(v *vip, payload []byte, vi int) *backend {
	b, _, why := w.quicServer(v.quic, payload, true, vi)
	if b == nil {
		w.c.QUICFallbacks[why]++
		return nil
	}
	w.c.QUICICMPRouted++
	return b
}
