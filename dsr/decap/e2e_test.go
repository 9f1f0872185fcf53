//go:build linux

package decap

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/vipd/vipd/packet"
	"github.com/vipd/vipd/testing/testkit"
)

// waitStats polls d's counters until ok accepts them, for at most
// replyTimeout: the reply to a packet can be on the wire before the
// counter that delivered it moves.
func waitStats(t *testing.T, d *Decap, what string, ok func(Stats) bool) Stats {
	t.Helper()
	var s Stats
	if !testkit.Poll(replyTimeout, func() bool { s = d.Stats(); return ok(s) }) {
		t.Fatalf("%s: counters stuck at %+v", what, s)
	}
	return s
}

// TestSYNACK4 is the DSR path end to end: an IPIP-encapsulated SYN to the
// VIP, sent from lb as vipd would, is answered by the backend's listener
// straight to the client, source VIP:80.
func TestSYNACK4(t *testing.T) {
	r := newRig(t)
	d := r.newDecap(t, Options{
		AllowedSources: []netip.Prefix{netip.MustParsePrefix("198.18.1.0/28")},
		CheckLocal:     true,
	})
	if d.TUN() != DefaultTUN {
		t.Errorf("TUN() = %q, want the default %q", d.TUN(), DefaultTUN)
	}
	run(t, d)
	r.echo(t, netip.AddrPortFrom(vip4, 80))
	s, c := r.sender(t), r.capture(t)

	s.Send(t, ipip(t, lbAddr4, beAddr4, tcp4(t, client4, vip4, 40001, 80, true, false, 1000, nil)))
	// The captured checksum is not checked: veth passes the sender's
	// partial checksum (offload) to the capture.
	c.waitTCP(t, synAckFrom(vip4, client4, 40001))
	waitStats(t, d, "decapsulated", func(s Stats) bool { return s.Decapsulated == 1 && s.Received == 1 })

	// Refused: a source outside the allow-list, a destination that is
	// not local. Each is counted; neither gets an answer (the SYN-ACK to
	// port 40004 below is the first thing captured after them).
	s.Send(t, ipip(t, stranger, beAddr4, tcp4(t, client4, vip4, 40002, 80, true, false, 1000, nil)))
	s.Send(t, ipip(t, lbAddr4, beAddr4, tcp4(t, client4, netip.MustParseAddr("198.18.0.102"), 40003, 80, true, false, 1000, nil)))
	s.Send(t, ipip(t, lbAddr4, beAddr4, tcp4(t, client4, vip4, 40004, 80, true, false, 1000, nil)))
	c.waitTCP(t, func(nl gopacket.NetworkLayer, tcp *layers.TCP) bool {
		if tcp.SYN && tcp.ACK && tcp.DstPort != 40001 && tcp.DstPort != 40004 {
			t.Errorf("answer to a refused packet: port %d", tcp.DstPort)
		}
		return synAckFrom(vip4, client4, 40004)(nl, tcp)
	})
	// Received is read before the outcome counters (Stats): wait until
	// every packet received has its outcome counted.
	st := waitStats(t, d, "drops", func(s Stats) bool {
		return s.Received == 4 && s.Decapsulated+s.TotalDropped() == 4
	})
	if st.Dropped[DropSource] != 1 || st.Dropped[DropNotLocal] != 1 || st.TotalDropped() != 2 {
		t.Errorf("drops %v, want one source and one not_local", st.Dropped)
	}
	// The open raw socket counts as a handler for protocol 4: the kernel
	// neither counts the packets as of an unknown protocol nor answers
	// vipd with "protocol unreachable" (it does both without a Decap).
	if n := r.BE.SNMP(t, "Ip", "InUnknownProtos"); n != 0 {
		t.Errorf("Ip InUnknownProtos = %d, want 0", n)
	}
	if n := r.BE.SNMP(t, "Icmp", "OutDestUnreachs"); n != 0 {
		t.Errorf("Icmp OutDestUnreachs = %d, want 0", n)
	}
}

// TestSYNACKPolicyRouting: backends often send DSR replies by a rule
// ("from VIP lookup T"). With any rule in place the kernel validates the
// source of packets from the TUN the long way, even with rp_filter 0;
// they must still be accepted, with no route to the client in the main
// table.
func TestSYNACKPolicyRouting(t *testing.T) {
	r := newRig(t)
	r.BE.Must(t, "ip", "route", "del", "198.18.2.0/24")
	r.BE.Must(t, "ip", "route", "add", "default", "via", lbAddr4.String(), "table", "100")
	r.BE.Must(t, "ip", "rule", "add", "from", vip4.String(), "lookup", "100")
	d := r.newDecap(t, Options{})
	run(t, d)
	r.echo(t, netip.AddrPortFrom(vip4, 80))
	s, c := r.sender(t), r.capture(t)
	s.Send(t, ipip(t, lbAddr4, beAddr4, tcp4(t, client4, vip4, 40001, 80, true, false, 1000, nil)))
	c.waitTCP(t, synAckFrom(vip4, client4, 40001))
}

// TestSYNACK6 is TestSYNACK4 for IPv6 in IPv6.
func TestSYNACK6(t *testing.T) {
	r := newRig(t)
	d := r.newDecap(t, Options{
		IPv6:           true,
		AllowedSources: []netip.Prefix{netip.MustParsePrefix("2001:2:0:1::/124")},
		CheckLocal:     true,
	})
	run(t, d)
	r.echo(t, netip.AddrPortFrom(vip6, 80))
	s, c := r.sender(t), r.capture(t)

	s.Send(t, ip6ip6(t, lbAddr6, beAddr6, tcp6(t, client6, vip6, 40001, 80, true, false, 1000, nil)))
	c.waitTCP(t, synAckFrom(vip6, client6, 40001))
	s.Send(t, ip6ip6(t, stranger6, beAddr6, tcp6(t, client6, vip6, 40002, 80, true, false, 1000, nil)))
	st := waitStats(t, d, "drop", func(s Stats) bool {
		return s.Received == 2 && s.Decapsulated+s.TotalDropped() == 2
	})
	if st.Decapsulated != 1 || st.Dropped[DropSource] != 1 {
		t.Errorf("stats %+v, want 1 decapsulated and 1 dropped for its source", st)
	}
	// Without the raw socket the kernel would answer with a parameter
	// problem (unknown next header).
	if n := r.BE.SNMP(t, "Ip6", "InUnknownProtos"); n != 0 {
		t.Errorf("Ip6InUnknownProtos = %d, want 0", n)
	}
	if n := r.BE.SNMP(t, "Icmp6", "OutParmProblems"); n != 0 {
		t.Errorf("Icmp6OutParmProblems = %d, want 0", n)
	}
}

// TestLocalRefresh: with CheckLocal, a VIP added to loopback after New is
// accepted once the address list is read again — from the backend's
// namespace, though the refresh runs on whatever thread the runtime picks:
// at the next LocalRefresh, or, with a LocalRefresh far beyond the test,
// when the kernel's address notification arrives.
func TestLocalRefresh(t *testing.T) {
	for _, tc := range []struct {
		name    string
		refresh time.Duration
	}{{"periodic", 50 * time.Millisecond}, {"notified", time.Hour}} {
		t.Run(tc.name, func(t *testing.T) { testLocalRefresh(t, tc.refresh) })
	}
}

func testLocalRefresh(t *testing.T, refresh time.Duration) {
	r := newRig(t)
	d := r.newDecap(t, Options{CheckLocal: true, LocalRefresh: refresh})
	run(t, d)
	vip2 := netip.MustParseAddr("198.18.0.102")
	s, c := r.sender(t), r.capture(t)
	s.Send(t, ipip(t, lbAddr4, beAddr4, tcp4(t, client4, vip2, 40001, 80, true, false, 1000, nil)))
	waitStats(t, d, "drop before the VIP exists", func(s Stats) bool { return s.Dropped[DropNotLocal] == 1 })

	r.BE.Must(t, "ip", "addr", "add", vip2.String()+"/32", "dev", "lo")
	r.echo(t, netip.AddrPortFrom(vip2, 80))
	// The refresh follows the addition, by a refresh period or by the
	// notification's trip: send until a SYN is let through, for as long
	// as a reply is waited for (a refresh can be late: netlink under
	// RTNL contention, a loaded machine).
	for i, end := 0, time.Now().Add(replyTimeout); time.Now().Before(end); i++ {
		s.Send(t, ipip(t, lbAddr4, beAddr4, tcp4(t, client4, vip2, uint16(40100+i%1000), 80, true, false, 1000, nil)))
		time.Sleep(25 * time.Millisecond)
		if d.Stats().Decapsulated > 0 {
			break
		}
	}
	c.waitTCP(t, func(nl gopacket.NetworkLayer, tcp *layers.TCP) bool {
		src, _ := netip.AddrFromSlice(nl.NetworkFlow().Src().Raw())
		return src == vip2 && tcp.SYN && tcp.ACK
	})
}

// TestCloseRemovesTUN checks that Close makes Run return, once it is
// receiving, and that the kernel deletes the non-persistent TUN with its
// last file.
func TestCloseRemovesTUN(t *testing.T) {
	r := newRig(t)
	d := r.newDecap(t, Options{TUN: "vtun-close", IPv6: true})
	if l := links(t, r.BE); !strings.Contains(l, "vtun-close") {
		t.Fatalf("TUN missing after New: links %q", l)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(context.Background()) }()
	// A packet read says Run's loops are up and back in their reads.
	r.sender(t).Send(t, ipip(t, lbAddr4, beAddr4, tcp4(t, client4, vip4, 40001, 81, true, false, 1000, nil)))
	waitStats(t, d, "Run receiving", func(s Stats) bool { return s.Received == 1 })
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("Run after Close returned %v, want os.ErrClosed", err)
		}
	case <-time.After(replyTimeout):
		t.Fatalf("Run did not return within %v of Close", replyTimeout)
	}
	if l := links(t, r.BE); strings.Contains(l, "vtun-close") {
		t.Errorf("TUN still there after Close: links %q", l)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestTUNInUse: a second decapsulator on the same TUN name fails and says
// why, and leaves the first one's device alone.
func TestTUNInUse(t *testing.T) {
	r := newRig(t)
	r.newDecap(t, Options{TUN: "vtun-busy"})
	err := r.BE.Do(func() error {
		d, err := New(Options{TUN: "vtun-busy"})
		if err == nil {
			d.Close()
		}
		return err
	})
	if !errors.Is(err, unix.EBUSY) || !strings.Contains(err.Error(), "in use") {
		t.Errorf("second New = %v, want EBUSY saying the TUN is in use", err)
	}
	if l := links(t, r.BE); !strings.Contains(l, "vtun-busy") {
		t.Errorf("first TUN gone: links %q", l)
	}
}

func sysctl(t *testing.T, r *rig, name string) string {
	t.Helper()
	return strings.TrimSpace(r.BE.Must(t, "sysctl", "-n", name))
}

// TestRPFilter: with net.ipv4.conf.all.rp_filter=1, New refuses and names
// the fix; with FixSysctls it applies it, keeping the other interfaces'
// effective filtering, packets flow, and Close restores everything.
func TestRPFilter(t *testing.T) {
	r := newRig(t)
	veth := "net.ipv4.conf." + r.BEIf + ".rp_filter"
	r.BE.Must(t, "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=1", veth+"=0", "net.ipv4.conf.default.rp_filter=0")

	err := r.BE.Do(func() error {
		d, err := New(Options{})
		if err == nil {
			d.Close()
		}
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "sysctl -w net.ipv4.conf.all.rp_filter=0") {
		t.Fatalf("New with all.rp_filter=1: %v, want an error naming the sysctl command", err)
	}
	if l := links(t, r.BE); strings.Contains(l, DefaultTUN) {
		t.Errorf("failed New left its TUN: links %q", l)
	}

	d := r.newDecap(t, Options{FixSysctls: true})
	for name, want := range map[string]string{
		"net.ipv4.conf.all.rp_filter":                "0",
		"net.ipv4.conf." + DefaultTUN + ".rp_filter": "0",
		veth:                              "1",
		"net.ipv4.conf.lo.rp_filter":      "1",
		"net.ipv4.conf.default.rp_filter": "1",
		"net.ipv6.conf." + DefaultTUN + ".disable_ipv6": "1",
	} {
		if got := sysctl(t, r, name); got != want {
			t.Errorf("while running: %s = %s, want %s", name, got, want)
		}
	}
	stop := run(t, d)
	r.echo(t, netip.AddrPortFrom(vip4, 80))
	s, c := r.sender(t), r.capture(t)
	s.Send(t, ipip(t, lbAddr4, beAddr4, tcp4(t, client4, vip4, 40001, 80, true, false, 1000, nil)))
	c.waitTCP(t, synAckFrom(vip4, client4, 40001))

	stop()
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for name, want := range map[string]string{
		"net.ipv4.conf.all.rp_filter":     "1",
		veth:                              "0",
		"net.ipv4.conf.lo.rp_filter":      "0",
		"net.ipv4.conf.default.rp_filter": "0",
	} {
		if got := sysctl(t, r, name); got != want {
			t.Errorf("after Close: %s = %s, want %s", name, got, want)
		}
	}
}

// ethtool sets a legacy ethtool flag (ETHTOOL_SGRO, ETHTOOL_STSO) on the
// interface name of the calling thread's namespace.
func ethtool(name string, cmd uint32, on bool) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	v := struct{ cmd, data uint32 }{cmd: cmd}
	if on {
		v.data = 1
	}
	// struct ifreq: the name, then (at 16) a pointer to the command.
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data unsafe.Pointer
		_    [16]byte
	}
	copy(ifr.name[:], name)
	ifr.data = unsafe.Pointer(&v)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); e != 0 {
		return e
	}
	return nil
}

// encapsulator plays vipd for real TCP connections from lb: lb's route to
// the VIP points into a TUN device, and every packet read from it is sent
// on to be inside an outer IPv4 header (as dsr.Encap4 writes it) or,
// with gue, an outer IPv4 and UDP header to DefaultGUEPort (checksum 0,
// source port 49152 + a flow hash mod 16384, as vipd writes it).
func (r *rig) encapsulator(t *testing.T, gue bool) {
	t.Helper()
	var tun *os.File
	err := r.LB.Do(func() (err error) {
		if tun, err = openTUN("enc0"); err != nil {
			return err
		}
		return setLinkUp("enc0")
	})
	if err != nil {
		t.Fatalf("encapsulator TUN in lb: %v", err)
	}
	hl := packet.IPv4MinSize
	if gue {
		hl += packet.UDPSize
	}
	// Outer headers plus inner packet must fit the veth's 1500 bytes.
	r.LB.Must(t, "ip", "link", "set", "enc0", "mtu", strconv.Itoa(1500-hl))
	r.LB.Must(t, "ip", "addr", "add", client4.String()+"/32", "dev", "lo")
	r.LB.Must(t, "ip", "route", "add", vip4.String()+"/32", "dev", "enc0", "src", client4.String())
	// The answers come back from the VIP over the veth, not over enc0.
	r.LB.Must(t, "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf."+r.LBIf+".rp_filter=0")
	s := r.sender(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1<<16)
		for {
			n, err := tun.Read(buf[hl:])
			if err != nil {
				return // closed at cleanup
			}
			inner := packet.IPv4(buf[hl : hl+n])
			if inner[0]>>4 != 4 {
				continue // the kernel's own IPv6 chatter on enc0
			}
			o := packet.IPv4(buf[:hl+n])
			o[0] = 0x45
			o.SetTOS(0)
			o.SetTotalLength(uint16(len(o)))
			o.SetID(0)
			o.SetFlagsFragmentOffset(0b010, 0) // DF
			o.SetTTL(64)
			o.SetProtocol(packet.ProtoIPIP)
			if gue {
				o.SetProtocol(packet.ProtoUDP)
				u := packet.UDP(o[packet.IPv4MinSize:])
				// A stand-in for vipd's flow hash: the client port.
				l4 := inner[inner.HeaderLength():]
				u.SetSourcePort(49152 + (uint16(l4[0])<<8|uint16(l4[1]))%16384)
				u.SetDestinationPort(DefaultGUEPort)
				u.SetLength(uint16(packet.UDPSize + n))
				u.SetChecksum(0)
			}
			o.SetSourceAddress(lbAddr4.As4())
			o.SetDestinationAddress(beAddr4.As4())
			o.SetChecksum(0)
			o.SetChecksum(o.ComputeChecksum())
			if s.TrySend(o) != nil {
				continue // e.g. ENOBUFS under load; TCP retransmits
			}
		}
	}()
	t.Cleanup(func() {
		tun.Close()
		<-done
	})
}

// TestTCPTransfer runs whole TCP connections through the decapsulator — a
// client in lb, its packets encapsulated in user space, the echo server
// in be answering directly — with GRO on be's veth, so that merged
// segments with partial checksums reach the raw socket as they would from
// a real NIC. 4 MiB echoed back must arrive intact.
//
// Over GUE nothing is merged (Completed stays 0, measured on Linux 6.18):
// GRO merges UDP datagrams only for a socket that enabled UDP_GRO, or for
// a tunnel socket with its own GRO handler (the kernel's fou), and the
// GUE socket is neither; the inner TCP segments arrive one by one.
func TestTCPTransfer(t *testing.T) {
	for _, tc := range []struct {
		name string
		gue  bool
	}{{"IPIP", false}, {"GUE", true}} {
		t.Run(tc.name, func(t *testing.T) { testTCPTransfer(t, tc.gue) })
	}
}

func testTCPTransfer(t *testing.T, gue bool) {
	r := newRig(t)
	// GRO only merges what was not segmented by TSO on the way in
	// (veth_skb_is_eligible_for_gro); gro_flush_timeout holds segments
	// across NAPI polls, as a busy NIC would.
	if err := r.LB.Do(func() error { return ethtool(r.LBIf, unix.ETHTOOL_STSO, false) }); err != nil {
		t.Fatalf("TSO off on lb's veth: %v", err)
	}
	if err := r.BE.Do(func() error { return ethtool(r.BEIf, unix.ETHTOOL_SGRO, true) }); err != nil {
		t.Fatalf("GRO on be's veth: %v", err)
	}
	r.BE.Must(t, "sh", "-c", "echo 2000000 > /sys/class/net/"+r.BEIf+"/gro_flush_timeout")

	o := Options{CheckLocal: true, AllowedSources: []netip.Prefix{netip.PrefixFrom(lbAddr4, 32)}}
	if gue {
		o.GUEPort = DefaultGUEPort
	}
	d := r.newDecap(t, o)
	run(t, d)
	r.echo(t, netip.AddrPortFrom(vip4, 80))
	r.encapsulator(t, gue)

	var conn net.Conn
	err := r.LB.Do(func() (err error) {
		dl := net.Dialer{Timeout: replyTimeout, LocalAddr: &net.TCPAddr{IP: ip(client4)}}
		conn, err = dl.Dial("tcp", netip.AddrPortFrom(vip4, 80).String())
		return err
	})
	if err != nil {
		t.Fatalf("dial the VIP from lb: %v (decap stats %+v)", err, d.Stats())
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(transferTimeout))

	data := make([]byte, 4<<20)
	for i := range data {
		data[i] = byte(i*7 + i>>11)
	}
	werr := make(chan error, 1)
	go func() {
		_, err := conn.Write(data)
		conn.(*net.TCPConn).CloseWrite()
		werr <- err
	}()
	got, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("read the echo: %v after %d bytes (decap stats %+v)", err, len(got), d.Stats())
	}
	if err := <-werr; err != nil {
		t.Fatalf("write: %v", err)
	}
	if sha256.Sum256(got) != sha256.Sum256(data) || !bytes.Equal(got, data) {
		t.Fatalf("echo differs: %d bytes back of %d", len(got), len(data))
	}
	st := d.Stats()
	t.Logf("decap stats: %+v", st)
	switch {
	case gue && (st.GUE == 0 || st.GUE != st.Received):
		t.Errorf("%d of %d packets came over GUE, want all", st.GUE, st.Received)
	case gue && st.Completed != 0:
		t.Errorf("%d merged segments over GUE: receive offload merged GUE datagrams, which the package documentation says it does not", st.Completed)
	case gue && st.Bytes > st.Decapsulated*(1500-packet.IPv4MinSize-packet.UDPSize):
		t.Errorf("%d bytes in %d packets: some larger than the MTU allows", st.Bytes, st.Decapsulated)
	case !gue && st.Completed == 0:
		t.Errorf("no merged segment was completed: GRO did not merge, the test did not cover what it is for")
	}
	if st.TotalDropped() != 0 {
		t.Errorf("drops: %v", st.Dropped)
	}
}

// TestReceiveDoesNotAllocate holds the per-packet claim on the real I/O
// path: a read from each socket (IPIP, IPv6 in IPv6, GUE over both
// families), the checks, a write to the TUN.
func TestReceiveDoesNotAllocate(t *testing.T) {
	r := newRig(t)
	d := r.newDecap(t, Options{IPv6: true, GUEPort: DefaultGUEPort, CheckLocal: true,
		AllowedSources: []netip.Prefix{netip.MustParsePrefix("198.18.1.0/28"), netip.MustParsePrefix("2001:2:0:1::/124")}})
	if len(d.rx) != 4 {
		t.Fatalf("%d sockets, want 4 (IPIP, IPv6 in IPv6, GUE over IPv4 and IPv6)", len(d.rx))
	}
	s := r.sender(t)
	const runs = 50
	// AllocsPerRun calls once more to warm up; queue enough for all, the
	// SYNs to a port nobody listens on (answered with RSTs, not counted).
	for i := range runs + 1 {
		s.Send(t, ipip(t, lbAddr4, beAddr4, tcp4(t, client4, vip4, uint16(41000+i), 81, true, false, 1, nil)))
		s.Send(t, ip6ip6(t, lbAddr6, beAddr6, tcp6(t, client6, vip6, uint16(41000+i), 81, true, false, 1, nil)))
		s.Send(t, gue4(t, lbAddr4, beAddr4, uint16(50000+i), DefaultGUEPort, tcp4(t, client4, vip4, uint16(42000+i), 81, true, false, 1, nil)))
		s.Send(t, gue6(t, lbAddr6, beAddr6, uint16(50000+i), DefaultGUEPort, tcp6(t, client6, vip6, uint16(42000+i), 81, true, false, 1, nil)))
	}
	// Without Run, nothing reads: the packets wait in the sockets.
	for _, rx := range d.rx {
		rx.f.SetReadDeadline(time.Now().Add(replyTimeout))
	}
	var err error
	allocs := testing.AllocsPerRun(runs, func() {
		for _, rx := range d.rx {
			if e := d.receive(rx); e != nil && err == nil {
				err = e
			}
		}
	})
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	if allocs != 0 {
		t.Errorf("%v allocations per 4 packets", allocs)
	}
	if st := d.Stats(); st.Decapsulated != 4*(runs+1) || st.GUE != 2*(runs+1) {
		t.Errorf("decapsulated %d (%d GUE), want %d (%d): %+v", st.Decapsulated, st.GUE, 4*(runs+1), 2*(runs+1), st)
	}
}
