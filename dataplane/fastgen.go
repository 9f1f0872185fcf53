package dataplane

import (
	"hash/maphash"
	"net/netip"

	"github.com/vipd/vipd/dataplane/quiclb"
)

// Generation returns the snapshot's generation (see gen): the one a fast
// path must use while this snapshot is the current one.
func (s *Snapshot) Generation() uint32 { return s.gen }

// setGeneration sets fastState and gen: prev's generation when the state
// is prev's, else the next one. kept[i] (nil: none) says VIP i and its
// backends are prev's VIP i's, whose part of the hash is reused: a health
// event rehashes one VIP, not all (BenchmarkPublishFlap).
func (s *Snapshot) setGeneration(prev *Snapshot, spec *Spec, kept []bool) {
	s.fastState = s.fastStateHash(prev, spec, kept)
	switch {
	case prev == nil:
		s.gen = 1
	case prev.fastState == s.fastState:
		s.gen = prev.gen
	default:
		s.gen = prev.gen + 1
	}
}

// fastSeed keys fastStateHash for the process's life.
var fastSeed = maphash.MakeSeed()

// fastStateHash hashes everything a worker reads to forward a packet of an
// established flow, or a NAT reply, as it does (and so everything a fast
// path entry is computed from, or whose change makes the worker decide
// otherwise): the ports' MACs, MTUs and addresses, the clients' next
// hops, the box's own addresses, each VIP's addressing, mode and
// encapsulation and whether it gives previous-owner hints, each of its
// backends' reference, address, port, MACs, epoch and whether it keeps
// its flows, and its QUIC-LB routing (configurations, keys and server
// IDs: they route an established flow's packets ahead of its entry). Not
// the Maglev tables, weights or schedulers, which only pick the backends
// of new flows, nor a drain (a draining backend keeps its flows). Each
// VIP's part is kept in its vipBuild. TestFastGenerationProperty changes
// every field of a Spec in turn and checks that the generation moves
// whenever a worker then forwards some established flow's packet
// otherwise.
func (s *Snapshot) fastStateHash(prev *Snapshot, spec *Spec, kept []bool) uint64 {
	type box struct {
		portSettings
		gw4, gw6                   [6]byte
		vips, backends, neighbours int
	}
	type neighbour struct {
		addr netip.Addr
		mac  [6]byte
	}
	h := maphash.Comparable(fastSeed, box{s.portSettings, s.gw4, s.gw6, len(s.vips), len(s.backends), len(s.neighbors)})
	add := func(x uint64) { h = (h ^ x) * 0x9e3779b97f4a7c15 } // in order
	for _, p := range s.onLink4 {
		add(maphash.Comparable(fastSeed, p))
	}
	for _, p := range s.onLink6 {
		add(maphash.Comparable(fastSeed, p))
	}
	for _, a := range s.local {
		add(maphash.Comparable(fastSeed, a))
	}
	var nb uint64 // in any order: a map's
	for a, m := range s.neighbors {
		nb += maphash.Comparable(fastSeed, neighbour{a, m})
	}
	add(nb)
	for i := range s.vips {
		if kept != nil && kept[i] {
			s.build[i].fastState = prev.build[i].fastState
		} else {
			s.build[i].fastState = s.vipFastState(i, spec.VIPs[i].Backends)
		}
		add(s.build[i].fastState)
	}
	return h
}

// vipFastState is VIP i's part of fastStateHash, with its backends bs.
func (s *Snapshot) vipFastState(i int, bs []BackendSpec) uint64 {
	type vipState struct {
		i              int
		id             uint16
		v6, srcHash    bool
		addr4, encap4  [4]byte
		addr6, encap6  [16]byte
		port, guePort  uint16
		proto          uint8
		mode           Mode
		over           int
		plain, gue     bool
		srcBits4       uint32
		srcBits6       uint64
		hints, prevUDP bool
		backends       int
	}
	type backendState struct {
		ref         uint32
		live, keeps bool
		vip         int32
		addr4       [4]byte
		addr6       [16]byte
		port        uint16
		macs        [12]byte
		epoch       uint32
	}
	v := &s.vips[i]
	h := maphash.Comparable(fastSeed, vipState{i, v.id, v.v6, v.srcHash, v.addr4, v.encap4, v.addr6, v.encap6, v.port, v.guePort,
		v.proto, v.mode, v.over, v.plain, v.gue, v.srcBits4, v.srcBits6, v.prev != nil, v.prevUDP, len(bs)})
	for _, bsp := range bs {
		ref := bsp.Ref
		if int(ref) >= len(s.backends) {
			continue
		}
		b := &s.backends[ref]
		var epoch uint32
		if int(ref) < len(s.epochs) {
			epoch = s.epochs[ref]
		}
		h = (h ^ maphash.Comparable(fastSeed, backendState{ref, b.live, b.keepsFlows(), b.vip, b.addr4, b.addr6, b.port, b.macs, epoch})) * 0x9e3779b97f4a7c15
	}
	if v.quic != nil {
		h = (h ^ v.quic.fastState()) * 0x9e3779b97f4a7c15
	}
	return h
}

// fastState hashes what q routes by: each configuration (codepoint,
// lengths, key) and each server ID with the backend it names. Content,
// not identity: a reload compiles a new QUICSpec for an unchanged
// configuration, which must not retire the fast path's flows.
func (q *quicVIP) fastState() uint64 {
	type codec struct {
		rot           uint8
		sidLen, nonce int
		form          quiclb.Form
		key           [16]byte // the key's check value: the codec keeps no key
	}
	type server struct {
		rot uint8
		id  string
		ref uint32
	}
	h := maphash.Comparable(fastSeed, "quic-lb")
	for rot := range uint8(quiclb.NumConfigs) {
		c := q.dec.Codec(rot)
		if c == nil {
			continue
		}
		cfg := c.Config()
		k := codec{rot: rot, sidLen: cfg.ServerIDLen, nonce: cfg.NonceLen, form: c.Form(), key: c.KeyCheck()}
		h = (h ^ maphash.Comparable(fastSeed, k)) * 0x9e3779b97f4a7c15
	}
	var ids uint64 // in any order: maps'
	for rot, m := range q.ids {
		for id, ref := range m {
			ids += maphash.Comparable(fastSeed, server{uint8(rot), id, ref})
		}
	}
	return (h ^ ids) * 0x9e3779b97f4a7c15
}
