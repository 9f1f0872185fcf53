package arp

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/jsimonetti/rtnetlink/v2"
	"golang.org/x/sys/unix"

	"github.com/vipd/vipd/internal/linkwatch"
)

// kernel is what this package asks of the kernel's routing subsystem. The
// real one speaks rtnetlink; tests use a table in memory. Methods are not
// safe for concurrent use: each user owns its kernel.
type kernel interface {
	// Links returns every interface with its addresses.
	Links() ([]linkwatch.Link, error)
	// RouteTo asks the kernel which route it would use for dst
	// (RTM_GETROUTE without NLM_F_DUMP: a FIB lookup, not a table walk).
	RouteTo(dst netip.Addr) (route, error)
	// Routes returns the unicast routes of the main table, both families.
	Routes() ([]route, error)
	// Neighbors returns the IPv4 and IPv6 neighbor tables.
	Neighbors() ([]neighbor, error)
	Close() error
}

// route is one route, reduced to what next-hop resolution needs.
type route struct {
	Dst      netip.Prefix
	Type     uint8 // RTN_*; only RTN_UNICAST routes lead to a neighbor
	Ifindex  int
	Gateway  netip.Addr // invalid when the destination is on-link
	Src      netip.Addr // preferred source (RTA_PREFSRC), may be invalid
	MTU      int        // RTAX_MTU metric, 0 when the route sets none
	Priority uint32     // metric; lower wins among equal prefixes
}

// neighbor is one entry of the kernel neighbor table.
type neighbor struct {
	Ifindex int
	Addr    netip.Addr
	MAC     [6]byte
	State   uint16 // NUD_* bits
}

// usable reports whether the kernel vouches for the entry's MAC right now.
// DELAY and PROBE are entries in use whose confirmation is under way, so the
// MAC is still the best answer; STALE means unconfirmed for a while and is
// checked on the wire (the caller may still fall back to it).
func (n neighbor) usable() bool {
	const ok = unix.NUD_REACHABLE | unix.NUD_PERMANENT | unix.NUD_NOARP | unix.NUD_DELAY | unix.NUD_PROBE
	return n.State&ok != 0 && n.MAC != [6]byte{}
}

func (n neighbor) stale() bool { return n.State&unix.NUD_STALE != 0 && n.MAC != [6]byte{} }

// rtnl is the kernel over an rtnetlink socket.
type rtnl struct{ c *rtnetlink.Conn }

// dialKernel opens an rtnetlink socket in the calling thread's network
// namespace.
func dialKernel() (kernel, error) {
	c, err := rtnetlink.Dial(nil)
	if err != nil {
		return nil, fmt.Errorf("arp: dial rtnetlink: %w", err)
	}
	return &rtnl{c: c}, nil
}

func (k *rtnl) Close() error { return k.c.Close() }

func (k *rtnl) Links() ([]linkwatch.Link, error) { return linkwatch.List(k.c) }

func (k *rtnl) RouteTo(dst netip.Addr) (route, error) {
	dst = dst.Unmap()
	req := &rtnetlink.RouteMessage{
		Family:     unix.AF_INET,
		DstLength:  32,
		Attributes: rtnetlink.RouteAttributes{Dst: net.IP(dst.AsSlice())},
	}
	if dst.Is6() {
		req.Family, req.DstLength = unix.AF_INET6, 128
	}
	ms, err := k.c.Route.Get(req)
	if err != nil {
		return route{}, fmt.Errorf("arp: route to %v: %w", dst, err)
	}
	if len(ms) == 0 {
		return route{}, fmt.Errorf("arp: route to %v: empty answer", dst)
	}
	return routeFromMessage(&ms[0]), nil
}

func (k *rtnl) Routes() ([]route, error) {
	ms, err := k.c.Route.List()
	if err != nil {
		return nil, fmt.Errorf("arp: list routes: %w", err)
	}
	var rs []route
	for i := range ms {
		m := &ms[i]
		table := uint32(m.Table)
		if m.Attributes.Table != 0 {
			table = m.Attributes.Table
		}
		if table != unix.RT_TABLE_MAIN || m.Type != unix.RTN_UNICAST {
			continue
		}
		rs = append(rs, routeFromMessage(m))
	}
	return rs, nil
}

func (k *rtnl) Neighbors() ([]neighbor, error) {
	ms, err := k.c.Neigh.List()
	if err != nil {
		return nil, fmt.Errorf("arp: list neighbors: %w", err)
	}
	ns := make([]neighbor, 0, len(ms))
	for i := range ms {
		if n, ok := neighborFromMessage(&ms[i]); ok {
			ns = append(ns, n)
		}
	}
	return ns, nil
}

// routeFromMessage reduces a route message. A multipath route is reduced to
// its first next hop: RTM_GETROUTE answers with the hop the kernel picked, and
// a dump's first hop is as good as any for the default gateway.
func routeFromMessage(m *rtnetlink.RouteMessage) route {
	a := &m.Attributes
	r := route{
		Type:     m.Type,
		Ifindex:  int(a.OutIface),
		Gateway:  linkwatch.AddrFromIP(a.Gateway),
		Src:      linkwatch.AddrFromIP(a.Src),
		Priority: a.Priority,
	}
	if a.Via != nil && !r.Gateway.IsValid() {
		r.Gateway = linkwatch.AddrFromIP(a.Via.Addr) // RFC 5549: IPv4 over an IPv6 next hop
	}
	if len(a.Multipath) > 0 && r.Ifindex == 0 {
		h := a.Multipath[0]
		r.Ifindex = int(h.Hop.IfIndex)
		r.Gateway = linkwatch.AddrFromIP(h.Gateway)
		if h.Via != nil && !r.Gateway.IsValid() {
			r.Gateway = linkwatch.AddrFromIP(h.Via.Addr)
		}
	}
	if a.Metrics != nil {
		r.MTU = int(a.Metrics.MTU)
	}
	dst := linkwatch.AddrFromIP(a.Dst)
	if !dst.IsValid() {
		dst = netip.IPv4Unspecified()
		if m.Family == unix.AF_INET6 {
			dst = netip.IPv6Unspecified()
		}
	}
	if p, err := dst.Prefix(int(m.DstLength)); err == nil {
		r.Dst = p
	}
	return r
}

func neighborFromMessage(m *rtnetlink.NeighMessage) (neighbor, bool) {
	if m.Attributes == nil || (m.Family != unix.AF_INET && m.Family != unix.AF_INET6) {
		return neighbor{}, false
	}
	n := neighbor{Ifindex: int(m.Index), Addr: linkwatch.AddrFromIP(m.Attributes.Address), State: m.State}
	if !n.Addr.IsValid() {
		return neighbor{}, false
	}
	if len(m.Attributes.LLAddress) == 6 {
		n.MAC = [6]byte(m.Attributes.LLAddress)
	}
	return n, true
}
