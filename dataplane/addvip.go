package dataplane

// Building a snapshot's VIPs: NewSnapshotFrom adds each VIP of the spec
// (addVIP), with its encapsulation, its backends and Maglev table, its
// previous set, and its entries in the classifiers.

import (
	"errors"
	"fmt"

	"github.com/vipd/vipd/dsr"
	"github.com/vipd/vipd/nat"
)

// ErrVIPIsLocal is wrapped by NewSnapshot's error when a VIP address is
// also one of the box's own addresses. Such a VIP would take every packet
// to that address, the box's SSH and BGP included, from the kernel: the
// steering rule gives a VIP address to vipd whatever its protocol and port.
var ErrVIPIsLocal = errors.New("a VIP address is one of the box's own addresses")

// isLocal4 reports whether a is one of the box's addresses.
func (s *Snapshot) isLocal4(a uint32) bool { return s.local4.get(key4(a, 0, 0)) != empty }

// isLocal6 reports whether a is one of the box's addresses.
func (s *Snapshot) isLocal6(a *[16]byte) bool { return s.local6.get(mkKey6(a, 0, 0)) != empty }

func (s *Snapshot) addVIP(i int, vs *VIPSpec, prev *Snapshot) error {
	if !vs.Addr.IsValid() || vs.Addr.Is4In6() {
		return fmt.Errorf("%w: VIP %q: bad address %v", ErrSpec, vs.Name, vs.Addr)
	}
	v := &s.vips[i]
	*v = vip{id: vs.ID, name: vs.Name, v6: vs.Addr.Is6(), port: vs.Port, proto: vs.Proto, mode: vs.Mode, srcHash: vs.SrcHash}
	s.maxVIPID = max(s.maxVIPID, int(vs.ID))
	if v.v6 {
		v.addr6 = vs.Addr.As16()
	} else {
		v.addr4 = vs.Addr.As4()
	}
	if (v.v6 && s.isLocal6(&v.addr6)) || (!v.v6 && s.isLocal4(u32(v.addr4))) {
		return fmt.Errorf("%w: VIP %q: %v: %w; remove the address from the box's interfaces, or give the VIP another address", ErrSpec, vs.Name, vs.Addr, ErrVIPIsLocal)
	}
	if vs.Mode == ModeDSR {
		if !vs.EncapSrc.IsValid() || vs.EncapSrc.Is6() != v.v6 {
			return fmt.Errorf("%w: DSR VIP %q needs an encapsulation source of its family", ErrSpec, vs.Name)
		}
		if v.v6 {
			v.encap6 = vs.EncapSrc.As16()
		} else {
			v.encap4 = vs.EncapSrc.As4()
		}
		if err := v.setEncap(vs); err != nil {
			return fmt.Errorf("%w: DSR VIP %q: %v", ErrSpec, vs.Name, err)
		}
	}
	if err := s.classify(i, v); err != nil {
		return err
	}
	return s.addBackends(i, vs, v, true, prev)
}

// setEncap sets v's encapsulation from vs (a DSR VIP whose EncapSrc is
// set and of its family).
func (v *vip) setEncap(vs *VIPSpec) error {
	switch vs.Encap {
	case EncapIPIP:
		v.over = dsr.Overhead4
		if v.v6 {
			v.over = dsr.Overhead6
		}
	case EncapGUE:
		v.gue, v.guePort = true, vs.GUEPort
		if v.guePort == 0 {
			v.guePort = dsr.DefaultGUEPort
		}
		v.over = dsr.OverheadGUE4
		if v.v6 {
			v.over = dsr.OverheadGUE6
		}
	default:
		return fmt.Errorf("unknown encapsulation %d", vs.Encap)
	}
	pf := vs.EncapSrcPrefix
	if !pf.IsValid() {
		v.plain = !v.gue
		return nil
	}
	if vs.Encap != EncapIPIP {
		return fmt.Errorf("a per-flow encapsulation source prefix is for IP in IP (GUE varies the UDP source port)")
	}
	if pf.Addr().Is6() != v.v6 || !pf.Contains(vs.EncapSrc) {
		return fmt.Errorf("encapsulation source prefix %v does not contain the encapsulation source %v", pf, vs.EncapSrc)
	}
	host := pf.Addr().BitLen() - pf.Bits()
	if v.v6 {
		v.srcBits6 = 1<<min(host, 64) - 1
		if host >= 64 {
			v.srcBits6 = ^uint64(0)
		}
	} else {
		v.srcBits4 = uint32(1<<host - 1)
	}
	return nil
}

// addBackends enters the backends of VIP i into s.backends (and, when
// classify is set, the NAT reply classifiers) and gives v its Maglev
// table, reused from prev when its inputs are the same.
func (s *Snapshot) addBackends(i int, vs *VIPSpec, v *vip, classify bool, prev *Snapshot) error {
	bld := &s.build[i]
	*bld = vipBuild{spec: *vs}
	var members []member
	for _, bs := range vs.Backends {
		if classify && (!bs.Addr.IsValid() || bs.Addr.Is6() != v.v6 || bs.Addr.Is4In6()) {
			return fmt.Errorf("%w: VIP %q: backend %v is not of the VIP's family", ErrSpec, vs.Name, bs.Addr)
		}
		bld.maxRef = max(bld.maxRef, bs.Ref)
		b := &s.backends[bs.Ref]
		if b.live {
			return fmt.Errorf("%w: backend ref %d used twice", ErrSpec, bs.Ref)
		}
		*b = backend{live: true, vip: int32(i), state: bs.State, port: bs.Port, mac: bs.MAC, hasMAC: bs.MAC != [6]byte{}}
		copy(b.macs[:6], bs.MAC[:])
		copy(b.macs[6:], s.mac[s.egress()][:])
		if s.epochs[bs.Ref] != bs.Epoch {
			s.epochs[bs.Ref] = bs.Epoch // never with shared epochs (update)
		}
		if v.v6 {
			b.addr6 = bs.Addr.As16()
		} else {
			b.addr4 = bs.Addr.As4()
			b.dnat4 = nat.AddrSum4(v.addr4, b.addr4)
		}
		if classify && vs.Mode == ModeNAT {
			rp := bs.Port
			if rp == 0 {
				rp = vs.Port
			}
			if v.v6 {
				s.cls6.reply6.put(mkKey6(&b.addr6, vs.Proto, rp), int32(bs.Ref))
				share6(&s.cls6.replyAddr6, mkKey6(&b.addr6, vs.Proto, 0), int32(i))
			} else {
				s.cls4.reply4.put(key4(u32(b.addr4), vs.Proto, rp), int32(bs.Ref))
				share4(&s.cls4.replyAddr4, key4(u32(b.addr4), vs.Proto, 0), int32(i))
			}
		}
		if bs.State == BackendUp && bs.Weight > 0 {
			b.takes = true
			members = append(members, member{addr: bs.Addr, port: bs.Port, weight: bs.Weight})
			v.refs = append(v.refs, bs.Ref)
		}
	}
	v.setSched(vs, members)
	if err := s.setQUIC(vs, v, prev); err != nil {
		return err
	}
	mt, err := prev.tableFor(vs.ID, vs.TableSize, members)
	if err != nil {
		return fmt.Errorf("%w: VIP %q: %v", ErrSpec, vs.Name, err)
	}
	bld.table = mt
	v.table = mt.table
	if old := prev.tableOf(vs.ID); old != nil && old != mt {
		s.spares = addSpare(s.spares, old)
	}
	return s.addPrevious(i, vs, v, prev)
}

// addPrevious gives v its previous table (VIPSpec.Previous), reused from
// prev when one of its tables has the same inputs.
func (s *Snapshot) addPrevious(i int, vs *VIPSpec, v *vip, prev *Snapshot) error {
	bld := &s.build[i]
	v.prev, v.prevAddr4, v.prevAddr6, v.prevUDP, v.hintOver = nil, nil, nil, false, 0
	if len(vs.Previous) == 0 {
		return nil
	}
	if vs.Mode != ModeDSR || vs.Encap != EncapGUE {
		return fmt.Errorf("%w: VIP %q: previous-owner hints need DSR with GUE", ErrSpec, vs.Name)
	}
	members := make([]member, len(vs.Previous))
	for k, pb := range vs.Previous {
		if !pb.Addr.IsValid() || pb.Addr.Is6() != v.v6 || pb.Addr.Is4In6() {
			return fmt.Errorf("%w: VIP %q: previous backend %v is not of the VIP's family", ErrSpec, vs.Name, pb.Addr)
		}
		members[k] = member{addr: pb.Addr, port: pb.Port, weight: pb.Weight}
	}
	mt, err := prev.tableFor(vs.ID, vs.TableSize, members)
	if err != nil {
		return fmt.Errorf("%w: VIP %q: previous table: %v", ErrSpec, vs.Name, err)
	}
	bld.prev = mt
	v.prev, v.prevUDP = mt.table, vs.PreviousUDP
	if v.v6 {
		v.hintOver = dsr.OverheadHint6
		v.prevAddr6 = make([][16]byte, len(members))
		for k, m := range members {
			v.prevAddr6[k] = m.addr.As16()
		}
	} else {
		v.hintOver = dsr.OverheadHint4
		v.prevAddr4 = make([][4]byte, len(members))
		for k, m := range members {
			v.prevAddr4[k] = m.addr.As4()
		}
	}
	return nil
}

// classify enters VIP i into the classifier tables.
func (s *Snapshot) classify(i int, v *vip) error {
	if v.v6 {
		c := &s.cls6
		k := mkKey6(&v.addr6, v.proto, v.port)
		if c.exact6.get(k) >= 0 {
			return fmt.Errorf("%w: VIP %q overlaps another", ErrSpec, v.name)
		}
		c.exact6.put(k, int32(i))
		share6(&c.addr6, mkKey6(&v.addr6, v.proto, 0), int32(i))
		if c.addr6.get(mkKey6(&v.addr6, 0, 0)) < 0 {
			c.addr6.put(mkKey6(&v.addr6, 0, 0), int32(i))
		}
		return nil
	}
	c := &s.cls4
	a := u32(v.addr4)
	if c.exact4.get(key4(a, v.proto, v.port)) >= 0 {
		return fmt.Errorf("%w: VIP %q overlaps another", ErrSpec, v.name)
	}
	c.exact4.put(key4(a, v.proto, v.port), int32(i))
	share4(&c.addr4, key4(a, v.proto, 0), int32(i))
	if c.addr4.get(key4(a, 0, 0)) < 0 {
		c.addr4.put(key4(a, 0, 0), int32(i))
	}
	c.vipAddrs4.add(a)
	return nil
}

// share4 enters i under k, or marks k ambiguous if another index is there.
func share4(t *table4, k uint64, i int32) {
	if prev := t.get(k); prev != empty && prev != i {
		t.put(k, ambiguous)
	} else {
		t.put(k, i)
	}
}

func share6(t *table6, k key6, i int32) {
	if prev := t.get(k); prev != empty && prev != i {
		t.put(k, ambiguous)
	} else {
		t.put(k, i)
	}
}
