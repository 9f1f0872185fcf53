package arp

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/jsimonetti/rtnetlink/v2"
	"golang.org/x/sys/unix"
)

// kernel is what this package asks of the kernel's routing subsystem. The
// real one speaks rtnetlink; tests use a table in memory. Methods are not
// safe for concurrent use: each user owns its kernel.
type kernel interface {
	// Links returns every interface with its addresses.
	Links() ([]Link, error)
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

func (k *rtnl) Links() ([]Link, error) {
	lm, err := k.c.Link.List()
	if err != nil {
		return nil, fmt.Errorf("arp: list links: %w", err)
	}
	am, err := k.c.Address.List()
	if err != nil {
		return nil, fmt.Errorf("arp: list addresses: %w", err)
	}
	return linksFromMessages(lm, am), nil
}

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

// addrFromIP converts a netlink address; 4-byte and 16-byte forms only.
func addrFromIP(ip net.IP) netip.Addr {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Addr{}
	}
	return a.Unmap()
}

func linksFromMessages(lm []rtnetlink.LinkMessage, am []rtnetlink.AddressMessage) []Link {
	links := make([]Link, 0, len(lm))
	byIndex := make(map[int]int, len(lm))
	for i := range lm {
		m := &lm[i]
		l := Link{Index: int(m.Index)}
		if a := m.Attributes; a != nil {
			l.Name = a.Name
			l.MTU = int(a.MTU)
			if len(a.Address) == 6 {
				l.MAC = [6]byte(a.Address)
			}
		}
		byIndex[l.Index] = len(links)
		links = append(links, l)
	}
	for i := range am {
		p, ok := prefixFromMessage(&am[i])
		if !ok {
			continue
		}
		if j, ok := byIndex[int(am[i].Index)]; ok {
			links[j].Addrs = append(links[j].Addrs, p)
		}
	}
	for i := range links {
		sortPrefixes(links[i].Addrs)
	}
	return links
}

// prefixFromMessage returns the interface's own address with its prefix
// length. For IPv4, IFA_LOCAL is the local address and IFA_ADDRESS the peer
// on point-to-point links; for IPv6 only IFA_ADDRESS is set.
func prefixFromMessage(m *rtnetlink.AddressMessage) (netip.Prefix, bool) {
	if m.Attributes == nil {
		return netip.Prefix{}, false
	}
	ip := m.Attributes.Local
	if ip == nil {
		ip = m.Attributes.Address
	}
	a := addrFromIP(ip)
	if !a.IsValid() {
		return netip.Prefix{}, false
	}
	p, err := a.Prefix(int(m.PrefixLength))
	if err != nil {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, p.Bits()), true
}

func sortPrefixes(ps []netip.Prefix) {
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return cmp.Compare(a.Bits(), b.Bits())
	})
}

// routeFromMessage reduces a route message. A multipath route is reduced to
// its first next hop: RTM_GETROUTE answers with the hop the kernel picked, and
// a dump's first hop is as good as any for the default gateway.
func routeFromMessage(m *rtnetlink.RouteMessage) route {
	a := &m.Attributes
	r := route{
		Type:     m.Type,
		Ifindex:  int(a.OutIface),
		Gateway:  addrFromIP(a.Gateway),
		Src:      addrFromIP(a.Src),
		Priority: a.Priority,
	}
	if a.Via != nil && !r.Gateway.IsValid() {
		r.Gateway = addrFromIP(a.Via.Addr) // RFC 5549: IPv4 over an IPv6 next hop
	}
	if len(a.Multipath) > 0 && r.Ifindex == 0 {
		h := a.Multipath[0]
		r.Ifindex = int(h.Hop.IfIndex)
		r.Gateway = addrFromIP(h.Gateway)
		if h.Via != nil && !r.Gateway.IsValid() {
			r.Gateway = addrFromIP(h.Via.Addr)
		}
	}
	if a.Metrics != nil {
		r.MTU = int(a.Metrics.MTU)
	}
	dst := addrFromIP(a.Dst)
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
	n := neighbor{Ifindex: int(m.Index), Addr: addrFromIP(m.Attributes.Address), State: m.State}
	if !n.Addr.IsValid() {
		return neighbor{}, false
	}
	if len(m.Attributes.LLAddress) == 6 {
		n.MAC = [6]byte(m.Attributes.LLAddress)
	}
	return n, true
}

// ErrLinkNotFound is returned for an interface name the kernel does not know.
var ErrLinkNotFound = errors.New("arp: no such link")

func findLink(links []Link, name string) (Link, error) {
	for _, l := range links {
		if l.Name == name {
			return l, nil
		}
	}
	return Link{}, fmt.Errorf("%w: %q", ErrLinkNotFound, name)
}
