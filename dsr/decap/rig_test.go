//go:build linux

package decap

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/vipd/vipd/testing/nstest"
	"github.com/vipd/vipd/testing/testkit"
)

// rig is the end-to-end topology, nstest's Pair: namespace LB (playing
// vipd, and the router toward the clients) and namespace BE (a DSR
// backend) joined by a veth pair. BE holds the VIPs on loopback and
// routes the client prefixes back via LB, where the replies are captured.
//
//	LB  LBIf 198.18.1.1/24  2001:2:0:1::1/64 ──veth── BEIf 198.18.1.11/24  2001:2:0:1::11/64  BE
//	                                                   lo 198.18.0.101/32 2001:2::101/128
type rig struct{ *nstest.Pair }

// replyTimeout bounds every wait for a packet, or for a counter, in the
// end-to-end tests. Each wait ends as soon as what it waits for is seen,
// so the bound costs only a failing run; it is generous because a loaded
// 2-CPU machine (other test binaries, a CPU hog) delays a namespace's
// packets and the receive goroutines by seconds.
const replyTimeout = 10 * time.Second

// transferTimeout bounds a whole TCP transfer (TestTCPTransfer's 4 MiB
// both ways through two user-space tunnel ends), and so the echo
// server's connections.
const transferTimeout = 60 * time.Second

func newRig(t *testing.T) *rig {
	t.Helper()
	nstest.RequireRoot(t)
	r := &rig{nstest.NewPair(t, "lb", "be")}
	// The DSR backend: VIPs on loopback, not announced by ARP.
	r.BE.DSRBackend(t, vip4, vip6)
	r.BE.Must(t, "ip", "route", "add", "198.18.2.0/24", "via", lbAddr4.String())
	r.BE.Must(t, "ip", "-6", "route", "add", "2001:2:0:2::/64", "via", lbAddr6.String())
	return r
}

// newDecap creates a Decap inside BE; it is closed at cleanup.
func (r *rig) newDecap(t *testing.T, o Options) *Decap {
	t.Helper()
	d := nstest.Make(t, r.BE, "New", func() (*Decap, error) { return New(o) })
	t.Cleanup(func() { d.Close() })
	return d
}

// run runs d until the test ends, or until the returned function is
// called; either checks that Run stopped cleanly and in time.
func run(t *testing.T, d *Decap) (stop func()) {
	t.Helper()
	return testkit.Go(t, "Run", replyTimeout, d.Run).Stop
}

// echo starts a TCP echo server on addr inside BE; it stops at cleanup.
func (r *rig) echo(t *testing.T, addr netip.AddrPort) {
	t.Helper()
	r.BE.ServeTCP(t, net.ListenConfig{}, addr, func(c net.Conn) {
		defer c.Close()
		c.SetDeadline(time.Now().Add(transferTimeout))
		// Plain reads and writes: io.Copy between two TCP conns would
		// splice through pipes that a pool keeps open, which TestMain
		// would report as leaked.
		io.Copy(struct{ io.Writer }{c}, struct{ io.Reader }{c})
	})
}

// sender injects whole IP packets from LB (the header is the caller's,
// outer source included).
func (r *rig) sender(t *testing.T) *nstest.RawSender { return r.LB.RawSender(t) }

// capture reads the IP packets arriving on LB's veth (AF_PACKET, cooked:
// no Ethernet header).
type capture struct {
	fd  int
	buf []byte
}

func (r *rig) capture(t *testing.T) *capture {
	t.Helper()
	c := &capture{fd: -1, buf: make([]byte, 1<<16)}
	err := r.LB.Do(func() error {
		ifi, err := net.InterfaceByName(r.LBIf)
		if err != nil {
			return err
		}
		proto := int(htons(unix.ETH_P_ALL))
		if c.fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, proto); err != nil {
			return err
		}
		if err := unix.Bind(c.fd, &unix.SockaddrLinklayer{Protocol: uint16(proto), Ifindex: ifi.Index}); err != nil {
			return err
		}
		// Reads wake up every 100 ms so that waits stay bounded.
		return unix.SetsockoptTimeval(c.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100_000})
	})
	t.Cleanup(func() {
		if c.fd >= 0 {
			unix.Close(c.fd)
		}
	})
	if err != nil {
		t.Fatalf("capture in %s: %v", r.LB.Name, err)
	}
	return c
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// waitTCP returns the first captured TCP segment for which match is true,
// decoded by gopacket, or fails the test after replyTimeout.
func (c *capture) waitTCP(t *testing.T, match func(nl gopacket.NetworkLayer, tcp *layers.TCP) bool) gopacket.Packet {
	t.Helper()
	deadline := time.Now().Add(replyTimeout)
	for time.Now().Before(deadline) {
		n, from, err := unix.Recvfrom(c.fd, c.buf, 0)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			t.Fatalf("capture: %v", err)
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		first := layers.LayerTypeIPv4
		if n > 0 && c.buf[0]>>4 == 6 {
			first = layers.LayerTypeIPv6
		}
		p := gopacket.NewPacket(append([]byte(nil), c.buf[:n]...), first, gopacket.Default)
		tcp, _ := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if tcp == nil || p.NetworkLayer() == nil {
			continue
		}
		if match(p.NetworkLayer(), tcp) {
			return p
		}
	}
	t.Fatalf("no matching TCP segment captured in %v", replyTimeout)
	return nil
}

// synAckFrom matches the backend's SYN-ACK from vip:80 to client:sport.
func synAckFrom(vip, client netip.Addr, sport uint16) func(gopacket.NetworkLayer, *layers.TCP) bool {
	return func(nl gopacket.NetworkLayer, tcp *layers.TCP) bool {
		src, _ := netip.AddrFromSlice(nl.NetworkFlow().Src().Raw())
		dst, _ := netip.AddrFromSlice(nl.NetworkFlow().Dst().Raw())
		return src == vip && dst == client && tcp.SrcPort == 80 && tcp.DstPort == layers.TCPPort(sport) && tcp.SYN && tcp.ACK
	}
}

// links lists the interface names of ns.
func links(t *testing.T, ns *nstest.NS) string {
	t.Helper()
	out, err := exec.Command("ip", "-n", ns.Name, "-o", "link", "show").CombinedOutput()
	if err != nil {
		t.Fatalf("ip link in %s: %v\n%s", ns.Name, err, out)
	}
	var names []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			names = append(names, strings.TrimSuffix(strings.Split(f[1], "@")[0], ":"))
		}
	}
	return strings.Join(names, " ")
}
