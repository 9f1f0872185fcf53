// Package drivertest holds what the AF_XDP and AF_PACKET driver tests
// share: the far end of a veth pair (a raw packet socket in its own
// namespace), test frames recognised by their payload, a frame of the
// kernel's own to mix in, and the batch-by-batch exchange the
// dataplane.Queue contract requires. Test code only.
package drivertest

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"net"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/vipd/vipd/dataplane"
	"github.com/vipd/vipd/testing/nstest"
)

// Peer is the far end of the veth: a raw packet socket bound to ifname in
// ns, closed when the test ends.
type Peer struct {
	FD    int // the AF_PACKET socket, for tests that read what comes back
	Index int
	MAC   net.HardwareAddr
}

// OpenPeer opens the raw socket on ifname inside ns.
func OpenPeer(t *testing.T, ns *nstest.NS, ifname string) *Peer {
	t.Helper()
	p := &Peer{FD: -1}
	err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		p.Index, p.MAC = ifi.Index, ifi.HardwareAddr
		if p.FD, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL))); err != nil {
			return err
		}
		return unix.Bind(p.FD, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index})
	})
	if p.FD >= 0 {
		t.Cleanup(func() { unix.Close(p.FD) })
	}
	if err != nil {
		t.Fatalf("packet socket in %s: %v", ns.Name, err)
	}
	return p
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Send transmits f from the peer.
func (p *Peer) Send(t *testing.T, f []byte) {
	t.Helper()
	if err := unix.Sendto(p.FD, f, 0, &unix.SockaddrLinklayer{Ifindex: p.Index}); err != nil {
		t.Fatal(err)
	}
}

// mldReport is an MLDv2 report as the peer's kernel sends it on a fresh
// veth (captured from a failing run), Ethernet source to be filled in.
const mldReport = "33330000001600000000000086dd600000000024000100000000000000000000000000000000ff0200000000000000000000000000163a000502000001008f0043a10000000104000000ff0200000000000000000001ff2b2bbe"

// Noise sends a kernel-like frame from the peer's MAC that is not a test
// frame: tests must tell the two apart by payload, whenever it arrives.
func (p *Peer) Noise(t *testing.T) {
	t.Helper()
	f, err := hex.DecodeString(mldReport)
	if err != nil {
		t.Fatal(err)
	}
	copy(f[6:12], p.MAC)
	p.Send(t, f)
}

// Magic starts the payload of every test frame. Frames are recognised by
// it, never by their source MAC: the peer's kernel sends its own frames
// from that MAC too (IPv6 MLD reports and neighbor discovery).
var Magic = [8]byte{'v', 'i', 'p', 'd', 't', 'e', 's', 't'}

// Frame is a UDP packet (198.18.0.2:1000 → 198.18.0.1:2000) from src to
// dst, VLAN-tagged unless vlan is 0, whose payload (size bytes, at least
// 12) is Magic and the sequence number seq.
func Frame(t *testing.T, src, dst net.HardwareAddr, seq, size int, vlan uint16) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.IP{198, 18, 0, 2}, DstIP: net.IP{198, 18, 0, 1}}
	udp := &layers.UDP{SrcPort: 1000, DstPort: 2000}
	udp.SetNetworkLayerForChecksum(ip)
	payload := make([]byte, size)
	copy(payload, Magic[:])
	binary.BigEndian.PutUint32(payload[len(Magic):], uint32(seq))
	ls := []gopacket.SerializableLayer{&layers.Ethernet{SrcMAC: src, DstMAC: dst, EthernetType: layers.EthernetTypeIPv4}}
	if vlan != 0 {
		ls = []gopacket.SerializableLayer{&layers.Ethernet{SrcMAC: src, DstMAC: dst, EthernetType: layers.EthernetTypeDot1Q},
			&layers.Dot1Q{VLANIdentifier: vlan, Type: layers.EthernetTypeIPv4}}
	}
	ls = append(ls, ip, udp, gopacket.Payload(payload))
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Seq returns the sequence number of a test frame (IPv4, possibly
// VLAN-tagged, UDP 1000 → 2000, payload starting with Magic), and false for
// any other frame.
func Seq(f []byte) (uint32, bool) {
	l3 := 14
	if len(f) >= 18 && binary.BigEndian.Uint16(f[12:]) == 0x8100 {
		l3 = 18
	}
	l4, pay := l3+20, l3+28
	if len(f) < pay+len(Magic)+4 || binary.BigEndian.Uint16(f[l3-2:]) != 0x0800 || f[l3] != 0x45 ||
		f[l3+9] != 17 || binary.BigEndian.Uint16(f[l4:]) != 1000 || binary.BigEndian.Uint16(f[l4+2:]) != 2000 ||
		!bytes.Equal(f[pay:pay+len(Magic)], Magic[:]) {
		return 0, false
	}
	return binary.BigEndian.Uint32(f[pay+len(Magic):]), true
}

// patience bounds the waits for frames: they end as soon as the frames
// arrive, and a busy machine may take that long.
const patience = 30 * time.Second

// Exchange receives batches of up to batch frames from q until n test
// frames arrived or patience ran out, handing each batch back before the next
// receive, as the Queue contract requires. handle (may be nil) sets each
// test frame's verdict; every other frame (the kernel's own) gets other.
// It makes at least one round, so that n = 0 reaps completions and hands
// back late frames, and returns how many test frames arrived.
func Exchange(t *testing.T, q dataplane.Queue, batch int, other dataplane.Verdict, n int, handle func(d *dataplane.Desc, f []byte, seq uint32)) int {
	t.Helper()
	descs := make([]dataplane.Desc, batch)
	got := 0
	deadline := time.Now().Add(patience)
	for first := true; first || (got < n && time.Now().Before(deadline)); first = false {
		k, err := q.Receive(descs, 50*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		for i := range descs[:k] {
			d := &descs[i]
			f := d.Buf[d.Off : d.Off+d.Len]
			d.Verdict = other
			if seq, ok := Seq(f); ok {
				if handle != nil {
					handle(d, f, seq)
				}
				got++
			}
		}
		if err := q.Transmit(descs[:k]); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

// LinkFlap checks what a driver does when its link goes down under it
// and comes back. n test frames from the peer are received on q (whose
// interface is ifname in ns, with MAC mac) and sent back to the peer, but
// the link goes down between the receive and the transmit. Then:
//   - Transmit returns no error: a link that is down is no reason for a
//     worker, and with it the daemon, to stop;
//   - while the link is down an idle Receive waits out its timeout (after
//     one call that may return early): an error the kernel holds for the
//     socket must not turn the worker's poll into a busy loop;
//   - once the link is up again, the frames reach the peer.
func LinkFlap(t *testing.T, q dataplane.Queue, ns *nstest.NS, ifname string, mac net.HardwareAddr, peer *Peer, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		peer.Send(t, Frame(t, peer.MAC, mac, i, 60, 0))
	}
	// The link goes down once the first test frame is in hand, before
	// the Transmit that sends it back: Exchange fails the test if that
	// Transmit, or any after it, returns an error.
	down := false
	got := Exchange(t, q, 64, dataplane.VerdictDrop, n, func(d *dataplane.Desc, f []byte, _ uint32) {
		copy(f[0:6], peer.MAC)
		copy(f[6:12], mac)
		d.Verdict, d.Port = dataplane.VerdictTX, dataplane.PortIngress
		if !down {
			ns.Must(t, "ip", "link", "set", ifname, "down")
			down = true
		}
	})
	if got != n {
		t.Fatalf("received %d of %d frames", got, n)
	}
	descs := make([]dataplane.Desc, 64)
	const idle = 200 * time.Millisecond
	// The first Receive that finds nothing may return early, for the error
	// the link's going down left on the socket; the second must wait. A
	// Receive that returns frames is no sign of spinning: the peer's kernel
	// may have sent one (IPv6 neighbour discovery, an MLD report) before
	// the link went down.
	empty := 0
	for i := 0; i < 8 && empty < 2; i++ {
		start := time.Now()
		k, err := q.Receive(descs, idle)
		if err != nil {
			t.Fatalf("Receive with the link down: %v", err)
		}
		if err := q.Transmit(descs[:k]); err != nil {
			t.Fatalf("Transmit with the link down: %v", err)
		}
		if k > 0 {
			continue
		}
		if empty++; empty == 2 {
			if el := time.Since(start); el < idle/2 {
				t.Errorf("an idle Receive with the link down returned after %v of its %v: the worker would spin", el, idle)
			}
		}
	}
	if empty < 2 {
		t.Errorf("8 Receives with the link down, %d of them empty: frames keep coming", empty)
	}
	ns.Must(t, "ip", "link", "set", ifname, "up")
	unix.SetsockoptTimeval(peer.FD, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 50000})
	back := map[uint32]bool{}
	buf := make([]byte, 2048)
	for deadline := time.Now().Add(patience); len(back) < n && time.Now().Before(deadline); {
		Exchange(t, q, 64, dataplane.VerdictDrop, 0, nil) // the first transmit after the link is up sends what waited
		for {
			k, _, err := unix.Recvfrom(peer.FD, buf, 0)
			if err != nil {
				break
			}
			if seq, ok := Seq(buf[:k]); ok && bytes.Equal(buf[0:6], peer.MAC) && bytes.Equal(buf[6:12], mac) {
				back[seq] = true
			}
		}
	}
	if len(back) != n {
		t.Errorf("%d of the %d frames that waited for the link reached the peer", len(back), n)
	}
}
