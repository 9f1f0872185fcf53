package nstest

import (
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The addresses of a Pair's link: LB is .1, BE .11, in 198.18.1.0/24
// and 2001:2:0:1::/64.
var (
	PairLB4 = netip.MustParseAddr("198.18.1.1")
	PairBE4 = netip.MustParseAddr("198.18.1.11")
	PairLB6 = netip.MustParseAddr("2001:2:0:1::1")
	PairBE6 = netip.MustParseAddr("2001:2:0:1::11")

	// Far's addresses (AddFar): .2 in 198.18.4.0/24 and 2001:2:0:4::/64,
	// BE's end of that link is .1.
	PairFar4 = netip.MustParseAddr("198.18.4.2")
	PairFar6 = netip.MustParseAddr("2001:2:0:4::2")
)

// Pair is the rig of the tests around a DSR backend (dsr/decap/, health/tunprobe/,
// cmd/vipd-decap): namespace LB, playing vipd, and namespace BE, the
// backend, joined by a veth pair.
//
//	LB  LBIf 198.18.1.1/24  2001:2:0:1::1/64 ──veth── BEIf 198.18.1.11/24  2001:2:0:1::11/64  BE
//
// What a test adds around it (the VIPs on BE, routes, a third namespace)
// is its own.
type Pair struct {
	LB, BE     *NS
	LBIf, BEIf string
}

// NewPair builds a Pair whose namespaces' names start with lb and be; it
// is torn down at cleanup. Duplicate address detection is off in both
// before the link exists: until the link-local addresses have passed it,
// the first IPv6 packets between them wait (2 s measured).
func NewPair(tb T, lb, be string) *Pair {
	tb.Helper()
	p := &Pair{LB: New(tb, lb), BE: New(tb, be), LBIf: Name("vl"), BEIf: Name("vb")}
	p.LB.NoDAD(tb)
	p.BE.NoDAD(tb)
	Veth(tb, p.LB, p.LBIf, p.BE, p.BEIf)
	p.LB.AddAddrs(tb, p.LBIf, netip.PrefixFrom(PairLB4, 24), netip.PrefixFrom(PairLB6, 64))
	p.BE.AddAddrs(tb, p.BEIf, netip.PrefixFrom(PairBE4, 24), netip.PrefixFrom(PairBE6, 64))
	return p
}

// AddFar puts a namespace far, another host, behind BE and makes BE a
// router, as every Docker or Kubernetes node is (ip_forward=1, IPv6
// forwarding on); LB routes far's prefixes via BE:
//
//	LB ──veth── BE 198.18.4.1/24 2001:2:0:4::1/64 ──veth── 198.18.4.2/24 2001:2:0:4::2/64 far
func (p *Pair) AddFar(tb T) *NS {
	tb.Helper()
	far := New(tb, "far")
	far.NoDAD(tb)
	beF, farF := Name("vf"), Name("vf")
	Veth(tb, p.BE, beF, far, farF)
	p.BE.AddAddrs(tb, beF, netip.MustParsePrefix("198.18.4.1/24"), netip.MustParsePrefix("2001:2:0:4::1/64"))
	far.AddAddrs(tb, farF, netip.PrefixFrom(PairFar4, 24), netip.PrefixFrom(PairFar6, 64))
	p.LB.Must(tb, "ip", "route", "add", "198.18.4.0/24", "via", PairBE4.String())
	p.LB.Must(tb, "ip", "-6", "route", "add", "2001:2:0:4::/64", "via", PairBE6.String())
	p.BE.Must(tb, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
	return far
}

// NoDAD turns duplicate address detection off for the interfaces created
// in n from now on.
func (n *NS) NoDAD(tb T) {
	tb.Helper()
	n.Must(tb, "sysctl", "-qw", "net.ipv6.conf.default.accept_dad=0")
}

// AddAddrs adds prefixes to dev in n; IPv6 ones with nodad (see Must).
func (n *NS) AddAddrs(tb T, dev string, prefixes ...netip.Prefix) {
	tb.Helper()
	for _, p := range prefixes {
		args := []string{"ip", "addr", "add", p.String(), "dev", dev}
		if p.Addr().Is6() {
			args = append(args, "nodad")
		}
		n.Must(tb, args...)
	}
}

// AddVIPs puts vips on n's loopback as a DSR backend holds them (/32,
// /128 with nodad).
func (n *NS) AddVIPs(tb T, vips ...netip.Addr) {
	tb.Helper()
	for _, a := range vips {
		n.AddAddrs(tb, "lo", netip.PrefixFrom(a, a.BitLen()))
	}
}

// DelVIPs takes vips off n's loopback.
func (n *NS) DelVIPs(tb T, vips ...netip.Addr) {
	tb.Helper()
	for _, a := range vips {
		n.Must(tb, "ip", "addr", "del", netip.PrefixFrom(a, a.BitLen()).String(), "dev", "lo")
	}
}

// DSRBackend makes n a DSR backend of vips: they are on its loopback,
// and ARP neither answers for them nor uses them as a source
// (arp_ignore=1, arp_announce=2), so that only its own address is
// resolved on the link.
func (n *NS) DSRBackend(tb T, vips ...netip.Addr) {
	tb.Helper()
	n.AddVIPs(tb, vips...)
	n.Must(tb, "sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=1", "net.ipv4.conf.all.arp_announce=2")
}

// RawSender sends whole IP packets, built by the test (outer source
// included), from a namespace: IPPROTO_RAW sockets.
type RawSender struct {
	fd4, fd6 int
}

// RawSender opens a RawSender in n; it is closed at cleanup.
func (n *NS) RawSender(tb T) *RawSender {
	tb.Helper()
	s := &RawSender{fd4: -1, fd6: -1}
	err := n.Do(func() (err error) {
		if s.fd4, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW); err != nil {
			return err
		}
		s.fd6, err = unix.Socket(unix.AF_INET6, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
		return err
	})
	tb.Cleanup(func() {
		for _, fd := range []int{s.fd4, s.fd6} {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
	})
	if err != nil {
		tb.Fatalf("raw sockets in %s: %v", n.Name, err)
	}
	return s
}

// TrySend sends pkt, an IPv4 or IPv6 packet, toward its destination
// address, and returns the error (ENOBUFS, say, under load).
func (s *RawSender) TrySend(pkt []byte) error {
	if pkt[0]>>4 == 4 {
		return unix.Sendto(s.fd4, pkt, 0, &unix.SockaddrInet4{Addr: [4]byte(pkt[16:20])})
	}
	return unix.Sendto(s.fd6, pkt, 0, &unix.SockaddrInet6{Addr: [16]byte(pkt[24:40])})
}

// Send is TrySend that fails the test on an error.
func (s *RawSender) Send(tb T, pkt []byte) {
	tb.Helper()
	if err := s.TrySend(pkt); err != nil {
		tb.Fatalf("send: %v", err)
	}
}

// SNMP returns a counter of n from /proc/net/snmp (group "Ip", name
// "InAddrErrors") or, for a group ending in 6 ("Ip6", "Icmp6"), from
// /proc/net/snmp6 ("Ip6InUnknownProtos").
func (n *NS) SNMP(tb T, group, name string) int {
	tb.Helper()
	if strings.HasSuffix(group, "6") {
		for line := range strings.SplitSeq(n.Must(tb, "cat", "/proc/net/snmp6"), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == group+name {
				v, _ := strconv.Atoi(f[1])
				return v
			}
		}
		tb.Fatalf("no %s%s in /proc/net/snmp6 of %s", group, name, n.Name)
		return 0
	}
	// Pairs of lines: "Group: names..." then "Group: values...".
	lines := strings.Split(n.Must(tb, "cat", "/proc/net/snmp"), "\n")
	for i := 0; i+1 < len(lines); i++ {
		names, values := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(names) == 0 || names[0] != group+":" || len(values) != len(names) {
			continue
		}
		for j, f := range names {
			if f == name {
				v, _ := strconv.Atoi(values[j])
				return v
			}
		}
	}
	tb.Fatalf("no %s %s in /proc/net/snmp of %s", group, name, n.Name)
	return 0
}
