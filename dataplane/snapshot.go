package dataplane

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"slices"

	"github.com/vipd/vipd/hashing"
)

// Snapshot is the immutable state every worker forwards by. The control
// plane builds a new one for every change and publishes it atomically;
// workers pick up the current one at the start of each batch.
type Snapshot struct {
	// gen numbers the states of the snapshots NewSnapshotFrom builds one
	// from another (1 for the first) that a handed-down flow's packets
	// depend on (fastState, its hash): the generation of the fast path's
	// entries. A snapshot that changes only what new flows get (weights,
	// slow start, drains) keeps its predecessor's.
	gen       uint32
	fastState uint64
	portSettings

	vips     []vip
	backends []backend // indexed by Ref; live == false for holes
	maxVIPID int

	cls4, cls6 classifiers
	// local4 and local6 hold the box's own addresses (Spec.Local) under
	// key4(addr, 0, 0) and mkKey6(addr, 0, 0).
	local4    table4
	local6    table6
	gw4, gw6  [6]byte
	onLink4   []prefix4 // onLink's IPv4 prefixes, for the per-packet check
	onLink6   []prefix6 // and its IPv6 ones
	neighbors map[netip.Addr][6]byte

	// What NewSnapshotFrom reuses; workers never read it.
	//
	// epochs[ref] is BackendSpec.Epoch of the backend at ref (0 for
	// holes): a worker restarts its counters of a ref whose epoch changed
	// (syncCounters).
	epochs []uint32
	// build[i] is what VIP i was built from.
	build []vipBuild
	// byID maps VIP IDs to their index in vips.
	byID map[uint16]int32
	// local is Spec.localAddrs(): the addresses local4 and local6 hold.
	local []netip.Addr
	// spares are Maglev tables that recent snapshots replaced, newest
	// first, at most maglevSpares: a backend that goes down and comes back
	// (or a drain undone) finds its VIP's former table here.
	spares []*maglevTable

	// steady: built from a previous snapshot with the same addressing
	// (SteeringUnchanged).
	steady bool
}

// portSettings is the flow hash seed and the ports' settings: the part of a
// Snapshot that fastStateHash takes whole.
type portSettings struct {
	seed     uint64
	twoArmed bool
	mac      [2][6]byte
	mtu      [2]int
	addr4    [2][4]byte
	has4     [2]bool
	addr6    [2][16]byte
	has6     [2]bool
}

// vipBuild is what a VIP was built from.
type vipBuild struct {
	// fastState hashes the VIP's part of Snapshot.fastState.
	fastState uint64
	spec      VIPSpec // as given; its Backends are the caller's, immutable
	maxRef    uint32  // the largest Ref of spec.Backends
	table     *maglevTable
	prev      *maglevTable // of spec.Previous, nil if none
}

// SteeringUnchanged reports whether s was built by NewSnapshotFrom from a
// snapshot with the same addressing (no VIP, backend or box address
// changed): then the Steering of its spec is that of the previous one's,
// and the platform need not be told again.
func (s *Snapshot) SteeringUnchanged() bool { return s.steady }

// RefSlots is the length of the arrays indexed by backend reference: the
// snapshot's backend array, and each worker's per-backend counters.
func (s *Snapshot) RefSlots() int { return len(s.backends) }

// syncCounters returns c and epochs grown to cover every reference of s,
// with the counters of each reference whose epoch differs from s's set to
// zero: the reference now names another backend than the one they
// counted (control.Registry reuses references). A worker calls it once per
// snapshot change, with its own counters; it allocates only to grow.
func (s *Snapshot) syncCounters(c []FlowCounters, epochs []uint32) ([]FlowCounters, []uint32) {
	for len(c) < len(s.backends) {
		c = append(c, FlowCounters{})
	}
	for len(epochs) < len(c) {
		epochs = append(epochs, 0)
	}
	for r := range s.epochs {
		if epochs[r] != s.epochs[r] {
			if s.epochs[r] != 0 {
				// A hole (epoch 0) keeps its counts until the reference
				// is bound again: the last packets of a removed
				// backend stay readable.
				c[r] = FlowCounters{}
				epochs[r] = s.epochs[r]
			}
		}
	}
	return c, epochs
}

// prefix4 is an IPv4 prefix as network and mask words.
type prefix4 struct{ net, mask uint32 }

// prefix6 is an IPv6 prefix as network and mask, each in two words.
type prefix6 struct{ hi, lo, maskHi, maskLo uint64 }

func mkPrefix6(p netip.Prefix) prefix6 {
	a := p.Masked().Addr().As16()
	bits := p.Bits()
	var mhi, mlo uint64
	switch {
	case bits >= 64:
		mhi = ^uint64(0)
		if bits > 64 {
			mlo = ^uint64(0) << (128 - bits)
		}
	case bits > 0:
		mhi = ^uint64(0) << (64 - bits)
	}
	return prefix6{binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:]), mhi, mlo}
}

// onLinkClient6 is onLinkClient4 for IPv6: masks computed once per
// snapshot instead of netip.Prefix.Contains per packet.
func (s *Snapshot) onLinkClient6(a *[16]byte) bool {
	hi, lo := binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:])
	for _, p := range s.onLink6 {
		if hi&p.maskHi == p.hi && lo&p.maskLo == p.lo {
			return true
		}
	}
	return false
}

// onLinkClient4 reports whether an IPv4 client is on a connected subnet of
// the ingress port.
func (s *Snapshot) onLinkClient4(a uint32) bool {
	for _, p := range s.onLink4 {
		if a&p.mask == p.net {
			return true
		}
	}
	return false
}

// classifiers maps packets to VIPs for one address family.
type classifiers struct {
	// exact: (VIP address, protocol, port) → VIP index, with port 0 for
	// every-port VIPs.
	exact4 table4
	exact6 table6
	// addr: (VIP address, protocol, 0) → VIP index when the VIP is the only
	// one on that address and protocol, -2 when several share it, and
	// (VIP address, 0, 0) → any VIP index on that address. Used for
	// fragments (no ports) and ICMP.
	addr4 table4
	addr6 table6
	// reply: (NAT backend address, protocol, port) → backend ref (its VIP
	// is backends[ref].vip), port 0 for backends of every-port VIPs;
	// (NAT backend address, protocol, 0) → VIP index in replyAddr, or
	// ambiguous, for fragments.
	reply4     table4
	reply6     table6
	replyAddr4 table4
	replyAddr6 table6
	// vipAddrs4 holds every IPv4 VIP address (the keys (address, 0, 0)
	// of addr4): a miss in it spares the packet path a probe of addr4.
	vipAddrs4 addrFilter4
}

type vip struct {
	id      uint16
	name    string
	v6      bool
	addr4   [4]byte
	addr6   [16]byte
	port    uint16
	proto   uint8
	mode    Mode
	srcHash bool
	table   *hashing.Maglev
	refs    []uint32 // Maglev index → backend ref
	encap4  [4]byte
	encap6  [16]byte
	// over is the bytes DSR encapsulation adds (dsr.Overhead4, ...); gue
	// selects GUE, to port guePort; srcBits4 and srcBits6 are the host
	// bits of EncapSrcPrefix that the flow hash fills (IPIP only; for
	// IPv6, of the low 64 bits), 0 for a fixed source.
	over     int
	plain    bool // IP in IP from EncapSrc: wrap4 is dsr.Encap4
	gue      bool
	guePort  uint16
	srcBits4 uint32
	srcBits6 uint64
	// prev is the previous table (VIPSpec.Previous), nil if none, and
	// prevAddr4 or prevAddr6 its members' addresses by Maglev index;
	// hintOver is the encapsulation's overhead with a hint.
	prev      *hashing.Maglev
	prevAddr4 [][4]byte
	prevAddr6 [][16]byte
	prevUDP   bool
	hintOver  int

	// Scheduling of new flows (sched.go, setSched): the scheduler, bounded
	// Maglev's bound, each member's weight (by Maglev index, as refs) and
	// their sum.
	sched       Scheduler
	bound       float64
	weights     []uint32
	totalWeight int64

	// quic is the VIP's QUIC-LB routing (VIPSpec.QUIC), nil if off.
	quic *quicVIP
}

type backend struct {
	live bool
	// takes: it takes new flows (up, weight above 0: a member of its
	// VIP's Maglev table). In the padding after live: the struct stays 56
	// bytes (see macs).
	takes  bool
	vip    int32 // index of its VIP in this snapshot
	state  BackendState
	addr4  [4]byte
	addr6  [16]byte
	port   uint16
	mac    [6]byte
	hasMAC bool
	// macs is mac followed by the egress port's MAC (Snapshot.egress):
	// the destination and source of every frame sent to the backend,
	// written with one 8-byte and one 4-byte move (setBackendMACs)
	// rather than two 6-byte arrays, which go through the stack. mac
	// stays a field of its own although it is macs[:6]: without it the
	// struct is 52 bytes instead of 56, and indexing the backend array
	// cost 16–25 more instructions per hit (callgrind, Pipeline one-flow
	// NAT and DSR hits).
	macs [12]byte
	// dnat4 is nat.AddrSum4(VIP address, addr4): what the translation of
	// a packet for the VIP to this backend adds to its checksums.
	dnat4 uint32
}

// keepsFlows reports whether established flows stay on the backend.
func (b *backend) keepsFlows() bool { return b.live && b.state != BackendDown }

// ambiguous marks an address classifier entry shared by several VIPs.
const ambiguous = -2

// ErrSpec is wrapped by every error NewSnapshot returns.
var ErrSpec = errors.New("dataplane: invalid spec")

// NewSnapshot builds a Snapshot from spec: classifier tables and one Maglev
// table per VIP over its backends that are up. It is a pure function of
// spec; the result shares spec's Neighbors, Local and every
// VIP's Backends, which must not be modified afterwards.
func NewSnapshot(spec *Spec) (*Snapshot, error) { return NewSnapshotFrom(nil, spec) }

// NewSnapshotFrom builds the Snapshot of spec as NewSnapshot does, reusing
// what it can of prev (nil: nothing), the snapshot built before:
//
//   - a VIP whose Maglev inputs (the address, port and weight of its
//     backends that take new flows, in order, and TableSize) equal those of
//     the same VIP ID in prev, or of a table prev kept from its recent
//     changes (a backend that flaps back), keeps that table;
//   - when no VIP address, port, protocol, mode, encapsulation source or
//     backend address or port changed, nor the box's own addresses, its
//     ports' MACs or whether it is two-armed (a health, weight, drain or
//     next-hop change), the classifier tables are
//     prev's and only the VIPs whose VIPSpec changed are rebuilt: the cost
//     is then a copy of the backend array plus the changed VIPs.
//
// The result is the same as NewSnapshot(spec) would build, field for field
// (TestSnapshotFromMatchesScratch). A VIPSpec whose Backends slice is the
// very one prev was built from (same array, same length) is taken as
// unchanged without comparing its elements: the caller must not modify a
// Spec, or any slice it holds, once it has been passed here.
func NewSnapshotFrom(prev *Snapshot, spec *Spec) (*Snapshot, error) {
	s := &Snapshot{
		portSettings: portSettings{seed: spec.Seed, twoArmed: spec.TwoArmed, mac: spec.MAC, mtu: spec.MTU},
		gw4:          spec.ClientGateway4,
		gw6:          spec.ClientGateway6,
		neighbors:    spec.Neighbors,
		local:        spec.localAddrs(),
	}
	for _, p := range spec.ClientOnLink {
		if p.Addr().Is4() {
			bits := p.Bits()
			mask := uint32(0)
			if bits > 0 {
				mask = ^uint32(0) << (32 - bits)
			}
			s.onLink4 = append(s.onLink4, prefix4{u32(p.Masked().Addr().As4()), mask})
		} else {
			s.onLink6 = append(s.onLink6, mkPrefix6(p))
		}
	}
	for p := 0; p < 2; p++ {
		if s.mtu[p] == 0 {
			s.mtu[p] = 1500
		}
		if a := spec.Addr4[p]; a.Is4() {
			s.addr4[p], s.has4[p] = a.As4(), true
		}
		if a := spec.Addr6[p]; a.Is6() && !a.Is4In6() {
			s.addr6[p], s.has6[p] = a.As16(), true
		}
	}
	n := len(spec.VIPs)
	s.vips = make([]vip, n)
	s.build = make([]vipBuild, n)
	// same[i]: VIP i is exactly prev's VIP i, so its vip, backends
	// entries and Maglev table carry over as they are.
	var same []bool
	steady := false
	if prev != nil {
		same = make([]bool, n)
		// The backends' macs hold the egress port's MAC: a change of
		// either is no steady one.
		steady = prev.sameAddressing(spec, s.local, same) && prev.mac == spec.MAC && prev.twoArmed == spec.TwoArmed
	}
	s.spares = prev.sparesFor(spec)
	maxRef := uint32(0)
	nb := 0
	for i := range spec.VIPs {
		vs := &spec.VIPs[i]
		nb += len(vs.Backends)
		if same != nil && same[i] {
			maxRef = max(maxRef, prev.build[i].maxRef)
			continue
		}
		for _, b := range vs.Backends {
			maxRef = max(maxRef, b.Ref)
		}
	}
	if steady {
		s.steady = true
		if err := s.update(prev, spec, same, maxRef); err != nil {
			return nil, err
		}
		s.index()
		s.setGeneration(prev, spec, same)
		return s, nil
	}
	s.backends = make([]backend, maxRef+1)
	s.epochs = make([]uint32, maxRef+1)
	s.cls4 = classifiers{exact4: newTable4(n), addr4: newTable4(2 * n), reply4: newTable4(nb), replyAddr4: newTable4(nb)}
	s.cls6 = classifiers{exact6: newTable6(n), addr6: newTable6(2 * n), reply6: newTable6(nb), replyAddr6: newTable6(nb)}
	// The ports' own addresses are the box's too, whether or not the
	// caller listed them in Local.
	s.local4, s.local6 = newTable4(len(s.local)), newTable6(len(s.local))
	for _, a := range s.local {
		switch {
		case a.Is4() || a.Is4In6():
			s.local4.put(key4(u32(a.Unmap().As4()), 0, 0), 0)
		case a.Is6():
			a16 := a.As16()
			s.local6.put(mkKey6(&a16, 0, 0), 0)
		}
	}
	for i := range spec.VIPs {
		if err := s.addVIP(i, &spec.VIPs[i], prev); err != nil {
			return nil, err
		}
	}
	s.index()
	s.setGeneration(prev, spec, nil)
	return s, nil
}

// index fills byID from vips.
func (s *Snapshot) index() {
	s.byID = make(map[uint16]int32, len(s.vips))
	for i := range s.vips {
		s.byID[s.vips[i].id] = int32(i)
	}
}

// update builds s from prev when the addressing is unchanged (steady):
// the classifiers are prev's, the backend array a copy of prev's in which
// the entries of the VIPs that changed are rewritten.
func (s *Snapshot) update(prev *Snapshot, spec *Spec, same []bool, maxRef uint32) error {
	s.cls4, s.cls6, s.local4, s.local6 = prev.cls4, prev.cls6, prev.local4, prev.local6
	n := int(maxRef) + 1
	// The copy of the backend array is most of the cost of a health
	// event: appending to nil copies without zeroing first.
	if n <= len(prev.backends) {
		s.backends = append([]backend(nil), prev.backends[:n]...)
	} else {
		s.backends = append(append(make([]backend, 0, n), prev.backends...), make([]backend, n-len(prev.backends))...)
	}
	// The epochs change only when a reference is bound anew (a reload):
	// else they are shared, and addBackends finds nothing to write.
	shareEpochs := len(prev.epochs) == n
	for i := 0; shareEpochs && i < len(spec.VIPs); i++ {
		if !same[i] && !sameRefs(prev.build[i].spec.Backends, spec.VIPs[i].Backends) {
			shareEpochs = false
		}
	}
	if shareEpochs {
		s.epochs = prev.epochs
	} else {
		s.epochs = make([]uint32, n)
		copy(s.epochs, prev.epochs)
	}
	// Clear every changed VIP's old entries first, then write the new
	// ones: a reference that moved between two changed VIPs is not a
	// duplicate, one that a kept VIP still holds is.
	for i := range prev.build {
		if i < len(same) && same[i] {
			continue
		}
		for _, b := range prev.build[i].spec.Backends {
			if b.Ref <= maxRef {
				s.backends[b.Ref] = backend{}
				if !shareEpochs {
					s.epochs[b.Ref] = 0
				}
			}
		}
	}
	for i := range spec.VIPs {
		if same[i] {
			s.vips[i] = prev.vips[i]
			s.build[i] = prev.build[i]
			s.maxVIPID = max(s.maxVIPID, int(s.vips[i].id))
			continue
		}
		vs := &spec.VIPs[i]
		v := &s.vips[i]
		*v = prev.vips[i]
		v.table, v.refs = nil, nil
		s.maxVIPID = max(s.maxVIPID, int(vs.ID))
		// Only the name and the VIP's identity fields outside the
		// addressing may differ.
		v.id, v.name, v.srcHash = vs.ID, vs.Name, vs.SrcHash
		if err := s.addBackends(i, vs, v, false, prev); err != nil {
			return err
		}
	}
	return nil
}

// sameAddressing reports whether spec classifies packets and steers
// exactly as prev does: the same box addresses (local, as localAddrs
// returns them), the same VIPs in the same order with the same address,
// port, protocol, mode and encapsulation, and the same backend
// addresses and ports (and, for NAT VIPs, refs). It sets same[i] for
// every VIP i whose VIPSpec is entirely prev's, whatever the result.
func (prev *Snapshot) sameAddressing(spec *Spec, local []netip.Addr, same []bool) bool {
	steady := len(prev.build) == len(spec.VIPs) && slices.Equal(prev.local, local)
	for i := range spec.VIPs {
		if i >= len(prev.build) {
			return false
		}
		a, b := &prev.build[i].spec, &spec.VIPs[i]
		if a.Addr != b.Addr || a.Port != b.Port || a.Proto != b.Proto || a.Mode != b.Mode ||
			a.EncapSrc != b.EncapSrc || a.Encap != b.Encap || a.GUEPort != b.GUEPort ||
			a.EncapSrcPrefix != b.EncapSrcPrefix || len(a.Backends) != len(b.Backends) {
			steady = false
			continue
		}
		identical := sameSlice(a.Backends, b.Backends)
		if !identical {
			identical = true
			for j := range a.Backends {
				x, y := &a.Backends[j], &b.Backends[j]
				// NAT replies are classified by backend address and
				// port to the backend's ref (classifiers.reply4).
				if x.Addr != y.Addr || x.Port != y.Port || (b.Mode == ModeNAT && x.Ref != y.Ref) {
					steady = false
					identical = false
					break
				}
				identical = identical && *x == *y
			}
		}
		same[i] = identical && a.ID == b.ID && a.Name == b.Name && a.SrcHash == b.SrcHash && a.TableSize == b.TableSize &&
			slices.Equal(a.Previous, b.Previous) && a.PreviousUDP == b.PreviousUDP
		same[i] = same[i] && a.Scheduler == b.Scheduler && a.LoadBound == b.LoadBound // sched.go
		same[i] = same[i] && a.QUIC == b.QUIC                                         // quic.go
	}
	return steady
}

// sameRefs reports whether a and b bind the same refs under the same
// epochs, in the same order.
func sameRefs(a, b []BackendSpec) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Ref != b[i].Ref || a[i].Epoch != b[i].Epoch {
			return false
		}
	}
	return true
}

// sameSlice reports whether a and b are the same slice (same array, same
// length): then they hold the same elements, since specs are immutable.
func sameSlice(a, b []BackendSpec) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

func u32(a [4]byte) uint32 {
	return uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
}

// backendFor returns the backend a conntrack entry points at, if it still
// keeps flows and belongs to VIP vi.
func (s *Snapshot) backendFor(ref uint32, vi int) *backend {
	if ref >= uint32(len(s.backends)) {
		return nil
	}
	b := &s.backends[ref]
	if !b.keepsFlows() || b.vip != int32(vi) {
		return nil
	}
	return b
}

// clientMAC4 returns the next hop toward an IPv4 client, for NAT replies:
// the client itself when it is on a connected subnet of the ingress port
// (from the snapshot's neighbors, else what the workers learned from the
// client's own frames), else the gateway.
func (s *Snapshot) clientMAC4(a [4]byte, learned *NeighborCache) ([6]byte, bool) {
	if len(s.onLink4) > 0 && s.onLinkClient4(u32(a)) {
		if mac, ok := s.neighbors[netip.AddrFrom4(a)]; ok {
			return mac, true
		}
		return learned.lookup(nkey4(a))
	}
	return s.gw4, s.gw4 != [6]byte{}
}

// clientMAC6 is clientMAC4 for IPv6.
func (s *Snapshot) clientMAC6(a *[16]byte, learned *NeighborCache) ([6]byte, bool) {
	if len(s.onLink6) > 0 && s.onLinkClient6(a) {
		if mac, ok := s.neighbors[netip.AddrFrom16(*a)]; ok {
			return mac, true
		}
		return learned.lookup(nkey6(a))
	}
	return s.gw6, s.gw6 != [6]byte{}
}
