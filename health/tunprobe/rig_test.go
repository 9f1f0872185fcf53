//go:build linux

package tunprobe

import (
	"context"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vipd/vipd/dsr/decap"
	"github.com/vipd/vipd/testing/nstest"
	"github.com/vipd/vipd/testing/testkit"
)

// Addresses of the tests: 198.18.0.0/15 and 2001:2::/48 only.
var (
	vip4    = netip.MustParseAddr("198.18.0.101")
	boxAddr = nstest.PairLB4 // probe source and encapsulation source
	beAddr  = nstest.PairBE4

	vip6     = netip.MustParseAddr("2001:2::101")
	boxAddr6 = nstest.PairLB6
	beAddr6  = nstest.PairBE6
)

const vipPort = 8080

// rig is nstest's Pair: namespace LB, vipd's box (the prober), and BE, a
// DSR backend, joined by a veth pair. LB routes the VIPs toward the
// clients, out of a veth toward nowhere, as a vipd box routes them to its
// clients; BE holds the VIPs on loopback and a listener on VIP:vipPort.
//
//	LB  vc 198.18.2.1/24 (default route)   LBIf 198.18.1.1/24 ──veth── BEIf 198.18.1.11/24  BE
//	                                                                    lo 198.18.0.101/32 2001:2::101/128
type rig struct{ *nstest.Pair }

// probeTimeout bounds every probe; a failing probe waits this long.
const probeTimeout = 500 * time.Millisecond

func newRig(t *testing.T) *rig {
	t.Helper()
	nstest.RequireRoot(t)
	r := &rig{nstest.NewPair(t, "box", "be")}
	// The clients' side of the box, which its route to the VIPs takes.
	// (No dummy module here: a veth pair with both ends in LB.)
	cIf := nstest.Name("vc")
	nstest.Veth(t, r.LB, cIf, r.LB, nstest.Name("vd"))
	r.LB.Must(t, "ip", "addr", "add", "198.18.2.1/24", "dev", cIf)
	r.LB.Must(t, "ip", "route", "add", "default", "via", "198.18.2.254")
	r.LB.Must(t, "ip", "-6", "addr", "add", "2001:2:0:2::1/64", "dev", cIf, "nodad")
	r.LB.Must(t, "ip", "-6", "route", "add", "default", "via", "2001:2:0:2::254")
	r.BE.DSRBackend(t, vip4, vip6)
	r.BE.Sysctl(t, "net.ipv4.conf.all.rp_filter", "0")
	r.listen(t, netip.AddrPortFrom(vip4, vipPort))
	r.listen(t, netip.AddrPortFrom(vip6, vipPort))
	return r
}

func (r *rig) addVIPs(t *testing.T) {
	t.Helper()
	r.BE.AddVIPs(t, vip4, vip6)
}

func (r *rig) delVIPs(t *testing.T) {
	t.Helper()
	r.BE.DelVIPs(t, vip4, vip6)
}

// listen accepts and closes connections on addr inside BE until cleanup.
// IP_FREEBIND keeps it listening while the VIP is off loopback.
func (r *rig) listen(t *testing.T, addr netip.AddrPort) {
	t.Helper()
	r.BE.ServeTCP(t, net.ListenConfig{Control: freebind}, addr, func(c net.Conn) { c.Close() })
}

func freebind(network, _ string, rc syscall.RawConn) error {
	var err error
	rc.Control(func(fd uintptr) {
		level, opt := unix.IPPROTO_IP, unix.IP_FREEBIND
		if network == "tcp6" {
			level, opt = unix.IPPROTO_IPV6, unix.IPV6_FREEBIND
		}
		err = unix.SetsockoptInt(int(fd), level, opt, 1)
	})
	return err
}

// prober makes a Prober inside LB; it is closed at cleanup.
func (r *rig) prober(t *testing.T, o Options) *Prober {
	t.Helper()
	p := nstest.Make(t, r.LB, "New", func() (*Prober, error) { return New(o) })
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

// decap runs vipd's user-space decapsulator (IPIP, both families) in BE
// until cleanup.
func (r *rig) decap(t *testing.T) *decap.Decap { return r.decapGUE(t, 0) }

// decapGUE is decap that also receives GUE on port (0: none).
func (r *rig) decapGUE(t *testing.T, port uint16) *decap.Decap {
	t.Helper()
	d := nstest.Make(t, r.BE, "decap.New", func() (*decap.Decap, error) {
		return decap.New(decap.Options{TUN: nstest.Name("dt"), IPv6: true, CheckLocal: true, LocalRefresh: 50 * time.Millisecond, GUEPort: port})
	})
	t.Cleanup(func() { d.Close() }) // after Run stopped
	testkit.Go(t, "decap Run", testkit.Patience, d.Run)
	return d
}

// probe dials vip through path from p and reports whether the handshake
// completed within probeTimeout.
func probe(p *Prober, vip netip.Addr, path Path) error {
	return probeWithin(p, vip, path, probeTimeout)
}

// probeUp is a probe expected to succeed: it may take retransmitted SYNs
// (a lost or late first one is sent again after 1 s, then 3 s, 7 s).
func probeUp(p *Prober, vip netip.Addr, path Path) error {
	return probeWithin(p, vip, path, upTimeout)
}

// upTimeout bounds a probe expected to succeed.
const upTimeout = 10 * time.Second

func probeWithin(p *Prober, vip netip.Addr, path Path, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := p.Dial(ctx, netip.AddrPortFrom(vip, vipPort), path)
	if err != nil {
		return err
	}
	return c.Close()
}
