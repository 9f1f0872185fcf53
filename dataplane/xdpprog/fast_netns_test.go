package xdpprog

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// macOf returns the MAC address of dev in namespace n.
func (n *netNS) macOf(t testing.TB, dev string) [6]byte {
	t.Helper()
	var mac [6]byte
	if err := n.do(func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		copy(mac[:], ifi.HardwareAddr)
		return nil
	}); err != nil {
		t.Fatalf("MAC of %s: %v", dev, err)
	}
	return mac
}

// sendRaw sends frame out of dev in namespace n through an AF_PACKET
// socket: as written, checksums included.
func (n *netNS) sendRaw(t testing.TB, dev string, frame []byte) {
	t.Helper()
	idx := n.ifindex(t, dev)
	if err := n.do(func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Sendto(fd, frame, 0, &unix.SockaddrLinklayer{Ifindex: idx, Halen: 6})
	}); err != nil {
		t.Fatalf("send on %s: %v", dev, err)
	}
}

// TestFastEndToEnd runs the fast path in the kernel's receive path: the
// program in native mode on a veth, a flow's entry sending its frames back
// out (XDP_TX), and the peer namespace's own UDP socket at the backend
// address receiving what comes back, which the peer's stack delivers only
// with valid IPv4 and UDP checksums. Three datagrams and a deadline of two
// seconds each, between namespaces this test created.
//
//	peer ns: veth1 198.18.0.2/24 and 198.18.2.1/32 (the backend); it sends
//	         as the client 198.18.3.1, routed behind the box
//	box ns:  veth0 198.18.0.1/24 + vipd_steer with the fast path
func TestFastEndToEnd(t *testing.T) {
	p := loadFast(t, 1024)
	box, peer := boxAndPeer(t)
	if mode, err := attach(t, box, p, "veth0", Native); err != nil || mode != Native {
		t.Fatalf("Attach(veth0, Native) = %v, %v", mode, err)
	}
	var backend net.PacketConn
	if err := peer.do(func() (err error) { backend, err = net.ListenPacket("udp4", "198.18.2.1:8080"); return err }); err != nil {
		t.Fatalf("listen at the backend: %v", err)
	}
	t.Cleanup(func() { backend.Close() })

	peer.passOn(t, "veth1")
	boxMAC, peerMAC := box.macOf(t, "veth0"), peer.macOf(t, "veth1")
	if err := p.Fast().SetGeneration(1); err != nil {
		t.Fatal(err)
	}
	v := fastEntry(t, 7000, 8080, 1)
	v.MACs = [12]byte(append(peerMAC[:], boxMAC[:]...))
	key := FastKey4{Src: netip.MustParseAddr(client4).As4(), Dst: netip.MustParseAddr(vip4).As4(), SrcPort: 40000, DstPort: 7000, Proto: 17}
	put(t, p.Fast(), key, v)

	for i := range 3 {
		payload := fmt.Sprintf("datagram %d", i)
		frame := pk{src: client4, dst: vip4, proto: udp, sport: 40000, dport: 7000, payload: []byte(payload)}.frame(t)
		copy(frame[0:6], boxMAC[:])
		copy(frame[6:12], peerMAC[:])
		peer.sendRaw(t, "veth1", frame)
		backend.SetReadDeadline(time.Now().Add(30 * time.Second))
		buf := make([]byte, 100)
		n, from, err := backend.ReadFrom(buf)
		if err != nil {
			st, _ := p.Fast().Stats()
			t.Fatalf("datagram %d: the backend got nothing (%v); the fast path forwarded %d frames", i, err, st.Packets)
		}
		if string(buf[:n]) != payload || from.String() != client4+":40000" {
			t.Fatalf("datagram %d: the backend got %q from %v", i, buf[:n], from)
		}
	}
	st, err := p.Fast().Stats()
	if err != nil || st.Packets != 3 {
		t.Errorf("fast path counted %+v (%v), want 3 frames", st, err)
	}
}

// passOn attaches a program that passes every frame to dev in namespace n,
// in native mode. On a veth, frames sent by XDP (XDP_TX from the peer,
// bpf_redirect into it) arrive only at a device whose NAPI is on, which an
// XDP program (or GRO) turns on.
func (n *netNS) passOn(t testing.TB, dev string) {
	t.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, Instructions: asm.Instructions{
		asm.Mov.Imm(asm.R0, xdpPass), asm.Return(),
	}})
	if err != nil {
		t.Fatalf("XDP_PASS program: %v", err)
	}
	idx := n.ifindex(t, dev)
	var l link.Link
	if err := n.do(func() (err error) {
		l, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: idx, Flags: link.XDPDriverMode})
		return err
	}); err != nil {
		prog.Close()
		t.Fatalf("attach XDP_PASS to %s: %v", dev, err)
	}
	t.Cleanup(func() { l.Close(); prog.Close() })
}
