package linkwatch

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

// Link is the kernel's view of one interface.
type Link struct {
	Index int
	Name  string
	MAC   [6]byte // zero when the link has no Ethernet address (tun, lo)
	// MTU is the largest IP packet the link sends, in bytes, without the
	// Ethernet header (IFLA_MTU). A route may lower it for some
	// destinations.
	MTU int
	// Addrs are the link's own addresses with their prefix lengths,
	// unmasked (198.18.0.1/24): first its primary addresses, then the
	// ones that may float — the kernel's secondary addresses (a second
	// address in a subnet the link has) and host addresses (/32, /128) —
	// each group sorted (SortPrefixes). The virtual addresses keepalived
	// adds are of the second kind, so the first address of a link is its
	// own, whichever box holds a VRRP address at the moment.
	Addrs []netip.Prefix
	// Kind is the kind of a virtual link (IFLA_INFO_KIND: "veth",
	// "bond", "vlan"...), empty for a physical one.
	Kind string
}

// Equal reports whether l and o are the same view of a link.
func (l Link) Equal(o Link) bool {
	return l.Index == o.Index && l.Name == o.Name && l.MAC == o.MAC && l.MTU == o.MTU && l.Kind == o.Kind && slices.Equal(l.Addrs, o.Addrs)
}

// ErrNotFound is returned for an interface name the kernel does not know.
var ErrNotFound = errors.New("linkwatch: no such link")

// Find returns the link called name among links; the error wraps
// ErrNotFound when there is none.
func Find(links []Link, name string) (Link, error) {
	for _, l := range links {
		if l.Name == name {
			return l, nil
		}
	}
	return Link{}, fmt.Errorf("%w: %q", ErrNotFound, name)
}

// List returns every interface with its addresses, read on c.
func List(c *rtnetlink.Conn) ([]Link, error) {
	lm, err := c.Link.List()
	if err != nil {
		return nil, fmt.Errorf("linkwatch: list links: %w", err)
	}
	am, err := c.Address.List()
	if err != nil {
		return nil, fmt.Errorf("linkwatch: list addresses: %w", err)
	}
	return FromMessages(lm, am), nil
}

// list opens an rtnetlink socket in the calling thread's namespace and
// lists the links.
func list() ([]Link, error) {
	c, err := rtnetlink.Dial(nil)
	if err != nil {
		return nil, fmt.Errorf("linkwatch: dial rtnetlink: %w", err)
	}
	defer c.Close()
	return List(c)
}

// Read returns the kernel's view of the interface called name. The error
// wraps ErrNotFound when there is no such interface.
func Read(name string) (Link, error) {
	links, err := list()
	if err != nil {
		return Link{}, err
	}
	return Find(links, name)
}

// LocalAddrs returns every address of every interface of the box (of the
// calling thread's network namespace), loopback and link-local included:
// the destinations the box's kernel accepts as its own.
func LocalAddrs() ([]netip.Addr, error) {
	links, err := list()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, l := range links {
		for _, p := range l.Addrs {
			out = append(out, p.Addr())
		}
	}
	return out, nil
}

// FromMessages builds the links from rtnetlink link and address messages.
func FromMessages(lm []rtnetlink.LinkMessage, am []rtnetlink.AddressMessage) []Link {
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
			if a.Info != nil {
				l.Kind = a.Info.Kind
			}
		}
		byIndex[l.Index] = len(links)
		links = append(links, l)
	}
	floating := make([][]netip.Prefix, len(links))
	for i := range am {
		p, ok := prefixFromMessage(&am[i])
		if !ok {
			continue
		}
		j, ok := byIndex[int(am[i].Index)]
		switch {
		case !ok:
		case am[i].Flags&unix.IFA_F_SECONDARY != 0 || p.Bits() == p.Addr().BitLen():
			floating[j] = append(floating[j], p)
		default:
			links[j].Addrs = append(links[j].Addrs, p)
		}
	}
	for i := range links {
		SortPrefixes(links[i].Addrs)
		SortPrefixes(floating[i])
		links[i].Addrs = append(links[i].Addrs, floating[i]...)
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
	a := AddrFromIP(ip)
	if !a.IsValid() {
		return netip.Prefix{}, false
	}
	p, err := a.Prefix(int(m.PrefixLength))
	if err != nil {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, p.Bits()), true
}

// AddrFromIP converts a netlink address; 4-byte and 16-byte forms only,
// IPv4-mapped ones unmapped.
func AddrFromIP(ip net.IP) netip.Addr {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Addr{}
	}
	return a.Unmap()
}

// SortPrefixes sorts prefixes by address, then length: the order of
// Link.Addrs.
func SortPrefixes(ps []netip.Prefix) {
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return cmp.Compare(a.Bits(), b.Bits())
	})
}
