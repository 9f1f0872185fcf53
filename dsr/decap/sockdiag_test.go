//go:build linux

package decap

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/vipd/vipd/packet"
	"github.com/vipd/vipd/testing/nstest"
)

// diagNS is a namespace with the test addresses on lo, a sockDiag opened
// in it, and real sockets: TCP listeners (IPv4, IPv6 and a dual-stack
// one) with one established connection each, an unconnected UDP socket
// and a connected one.
type diagNS struct {
	sd *sockDiag
	// The server ends of the established connections, and the UDP
	// sockets' addresses.
	tcp4, tcp6, dual   net.Conn
	udpOpen, udpConnTo netip.AddrPort // unconnected socket; connected socket's local end
	udpPeer            netip.AddrPort // the connected socket's peer
}

func newDiagNS(tb testing.TB) *diagNS {
	tb.Helper()
	nstest.RequireRoot(tb)
	ns := nstest.New(tb, "sd")
	ns.Must(tb, "ip", "addr", "add", vip4.String()+"/32", "dev", "lo")
	ns.Must(tb, "ip", "addr", "add", client4.String()+"/32", "dev", "lo")
	ns.Must(tb, "ip", "addr", "add", vip6.String()+"/128", "dev", "lo", "nodad")
	ns.Must(tb, "ip", "addr", "add", client6.String()+"/128", "dev", "lo", "nodad")
	d := &diagNS{
		udpOpen:   netip.AddrPortFrom(vip4, 53),
		udpConnTo: netip.AddrPortFrom(vip4, 54),
		udpPeer:   netip.AddrPortFrom(client4, 5354),
	}
	var closers []interface{ Close() error }
	tb.Cleanup(func() {
		for _, c := range closers {
			c.Close()
		}
	})
	// established listens on addr and returns the server end of a
	// connection to it from client.
	established := func(network, addr string, client netip.Addr) (net.Conn, error) {
		ln, err := net.Listen(network, addr)
		if err != nil {
			return nil, err
		}
		closers = append(closers, ln)
		dl := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip(client)}, Timeout: replyTimeout}
		port := ln.Addr().(*net.TCPAddr).Port
		dst := netip.AddrPortFrom(vip4, uint16(port))
		if client.Is6() {
			dst = netip.AddrPortFrom(vip6, uint16(port))
		}
		c, err := dl.Dial("tcp", dst.String())
		if err != nil {
			return nil, err
		}
		closers = append(closers, c)
		s, err := ln.Accept()
		if err != nil {
			return nil, err
		}
		closers = append(closers, s)
		return s, nil
	}
	err := ns.Do(func() (err error) {
		if d.sd, err = openSockDiag(); err != nil {
			return err
		}
		closers = append(closers, d.sd)
		if d.tcp4, err = established("tcp4", vip4.String()+":80", client4); err != nil {
			return err
		}
		if d.tcp6, err = established("tcp6", "["+vip6.String()+"]:80", client6); err != nil {
			return err
		}
		// A dual-stack listener: its IPv4 connections are AF_INET6
		// sockets with mapped addresses.
		if d.dual, err = established("tcp", ":8080", client4); err != nil {
			return err
		}
		u, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(d.udpOpen))
		if err != nil {
			return err
		}
		closers = append(closers, u)
		uc, err := net.DialUDP("udp4", net.UDPAddrFromAddrPort(d.udpConnTo), net.UDPAddrFromAddrPort(d.udpPeer))
		if err != nil {
			return err
		}
		closers = append(closers, uc)
		return nil
	})
	if err != nil {
		tb.Fatalf("sockets in %s: %v", ns.Name, err)
	}
	return d
}

func addrPort(a net.Addr) netip.AddrPort {
	ap := a.(*net.TCPAddr).AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// TestSockDiag runs the real lookup against real sockets: an established
// connection matches from either end; a 5-tuple that has none does not,
// although the kernel answers it with the listener (or the unconnected
// UDP socket) that would receive the packet.
func TestSockDiag(t *testing.T) {
	d := newDiagNS(t)
	other := func(ap netip.AddrPort) netip.AddrPort { return netip.AddrPortFrom(ap.Addr(), ap.Port()+1) }
	for _, tc := range []struct {
		name          string
		proto         uint8
		local, remote netip.AddrPort
		want          bool
		fallback      bool // the kernel answers with a socket that is not connected to remote
	}{
		{"IPv4 established, server end", packet.ProtoTCP, addrPort(d.tcp4.LocalAddr()), addrPort(d.tcp4.RemoteAddr()), true, false},
		{"IPv4 established, client end", packet.ProtoTCP, addrPort(d.tcp4.RemoteAddr()), addrPort(d.tcp4.LocalAddr()), true, false},
		{"IPv4 to the listener, no connection", packet.ProtoTCP, addrPort(d.tcp4.LocalAddr()), other(addrPort(d.tcp4.RemoteAddr())), false, true},
		{"IPv4 from another client", packet.ProtoTCP, addrPort(d.tcp4.LocalAddr()), netip.AddrPortFrom(netip.MustParseAddr("198.18.2.8"), addrPort(d.tcp4.RemoteAddr()).Port()), false, true},
		{"IPv4, no listener", packet.ProtoTCP, netip.AddrPortFrom(vip4, 81), addrPort(d.tcp4.RemoteAddr()), false, false},
		{"IPv6 established", packet.ProtoTCP, addrPort(d.tcp6.LocalAddr()), addrPort(d.tcp6.RemoteAddr()), true, false},
		{"IPv6 to the listener, no connection", packet.ProtoTCP, addrPort(d.tcp6.LocalAddr()), other(addrPort(d.tcp6.RemoteAddr())), false, true},
		{"IPv4 on a dual-stack listener, established", packet.ProtoTCP, addrPort(d.dual.LocalAddr()), addrPort(d.dual.RemoteAddr()), true, false},
		{"IPv4 on a dual-stack listener, no connection", packet.ProtoTCP, addrPort(d.dual.LocalAddr()), other(addrPort(d.dual.RemoteAddr())), false, true},
		{"UDP, unconnected socket", packet.ProtoUDP, d.udpOpen, d.udpPeer, false, true},
		{"UDP, connected socket", packet.ProtoUDP, d.udpConnTo, d.udpPeer, true, false},
		{"UDP, connected socket, another peer", packet.ProtoUDP, d.udpConnTo, other(d.udpPeer), false, false},
		{"UDP, no socket", packet.ProtoUDP, netip.AddrPortFrom(vip4, 55), d.udpPeer, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := d.sd.Lookup(tc.proto, tc.local, tc.remote)
			if err != nil || got != tc.want {
				t.Errorf("Lookup(%d, %v, %v) = %v, %v; want %v", tc.proto, tc.local, tc.remote, got, err, tc.want)
			}
			// The kernel's own answer, to show what the remote check is for.
			peer, found, err := d.sd.query(tc.proto, tc.local, tc.remote)
			switch {
			case err != nil:
				t.Errorf("query: %v", err)
			case tc.want && (!found || peer != tc.remote):
				t.Errorf("query: socket with peer %v (found %v), want %v", peer, found, tc.remote)
			case tc.fallback && (!found || peer.Port() != 0 || !peer.Addr().IsUnspecified()):
				t.Errorf("query: socket with peer %v (found %v), want the kernel's fallback to an unconnected socket", peer, found)
			case !tc.want && !tc.fallback && found:
				t.Errorf("query: socket with peer %v, want none", peer)
			}
		})
	}
	if _, err := d.sd.Lookup(1, netip.AddrPortFrom(vip4, 0), netip.AddrPortFrom(client4, 0)); err == nil {
		t.Errorf("Lookup of ICMP: no error")
	}
	if _, err := d.sd.Lookup(packet.ProtoTCP, netip.AddrPortFrom(vip4, 80), netip.AddrPortFrom(client6, 1)); err == nil {
		t.Errorf("Lookup across families: no error")
	}
}

// TestSockDiagAfterTimeout: a query that times out (here its deadline
// has passed when it reads, as when the thread stalls after the send)
// leaves its reply queued; the lookups after it must still get their own
// answers. Before, each read the previous one's: a "no such socket" for
// an established connection, then only sequence-number errors.
func TestSockDiagAfterTimeout(t *testing.T) {
	d := newDiagNS(t)
	local, remote := addrPort(d.tcp4.LocalAddr()), addrPort(d.tcp4.RemoteAddr())
	noListener := netip.AddrPortFrom(vip4, 81)
	d.sd.timeout = -time.Second
	if _, err := d.sd.Lookup(packet.ProtoTCP, noListener, remote); err == nil {
		t.Fatal("a lookup whose deadline had passed did not fail")
	}
	d.sd.timeout = sockDiagTimeout
	for i := 0; i < 4; i++ {
		if got, err := d.sd.Lookup(packet.ProtoTCP, local, remote); !got || err != nil {
			t.Errorf("lookup %d after a timeout: established connection found %v, err %v", i, got, err)
		}
	}
}

// BenchmarkSockDiag is the cost of one kernel lookup, what a hinted
// packet costs without the decision cache (compare BenchmarkHinted).
func BenchmarkSockDiag(b *testing.B) {
	d := newDiagNS(b)
	local, remote := addrPort(d.tcp4.LocalAddr()), addrPort(d.tcp4.RemoteAddr())
	miss := netip.AddrPortFrom(remote.Addr(), remote.Port()+1)
	for _, bc := range []struct {
		name   string
		remote netip.AddrPort
		want   bool
	}{{"established", remote, true}, {"listener", miss, false}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if ok, err := d.sd.Lookup(packet.ProtoTCP, local, bc.remote); ok != bc.want || err != nil {
					b.Fatalf("Lookup = %v, %v", ok, err)
				}
			}
		})
	}
}
