package dataplane

import "net/netip"

// ReplyKey names the source of NAT replies: packets from (Addr, Proto,
// Port) are replies to translate; Port 0 means any port.
type ReplyKey struct {
	Addr  netip.Addr
	Proto uint8
	Port  uint16
}

// Steering is what a snapshot built from a Spec claims, as the XDP
// steering program's maps hold it, and the next hops it needs resolved.
// It is the one derivation of those sets: the platform loads them into the
// program, and the differential test of the steering rule too.
type Steering struct {
	VIPs    []netip.Addr // VIP addresses, each once
	Replies []ReplyKey   // NAT reply sources, each once
	// Local is the box's own addresses: Spec.Local and the ports'
	// addresses.
	Local    []netip.Addr
	NextHops []netip.Addr // backend addresses, each once
}

// Steering returns the sets of the steering rule for spec.
func (spec *Spec) Steering() Steering {
	var s Steering
	seenVIP := map[netip.Addr]bool{}
	seenHop := map[netip.Addr]bool{}
	seenReply := map[ReplyKey]bool{}
	for _, v := range spec.VIPs {
		if !seenVIP[v.Addr] {
			seenVIP[v.Addr] = true
			s.VIPs = append(s.VIPs, v.Addr)
		}
		for _, b := range v.Backends {
			if !seenHop[b.Addr] {
				seenHop[b.Addr] = true
				s.NextHops = append(s.NextHops, b.Addr)
			}
			if v.Mode != ModeNAT {
				continue
			}
			k := ReplyKey{b.Addr, v.Proto, b.Port}
			if b.Port == 0 {
				k.Port = v.Port
			}
			if !seenReply[k] {
				seenReply[k] = true
				s.Replies = append(s.Replies, k)
			}
		}
	}
	seenLocal := map[netip.Addr]bool{}
	for _, a := range spec.localAddrs() {
		if a = a.Unmap(); !seenLocal[a] {
			seenLocal[a] = true
			s.Local = append(s.Local, a)
		}
	}
	return s
}

// localAddrs is Spec.Local with the ports' own addresses, the valid ones.
func (spec *Spec) localAddrs() []netip.Addr {
	var out []netip.Addr
	for _, l := range [][]netip.Addr{spec.Local, spec.Addr4[:], spec.Addr6[:]} {
		for _, a := range l {
			if a.IsValid() {
				out = append(out, a)
			}
		}
	}
	return out
}
