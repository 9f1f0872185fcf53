package xdpprog

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vipd/vipd/testing/nstest"
)

// sendRaw sends frame out of dev in namespace n through an AF_PACKET
// socket: as written, checksums included.
func sendRaw(t testing.TB, n *nstest.NS, dev string, frame []byte) {
	t.Helper()
	idx := n.Interface(t, dev).Index
	if err := n.Do(func() error {
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
	if err := peer.Do(func() (err error) { backend, err = net.ListenPacket("udp4", "198.18.2.1:8080"); return err }); err != nil {
		t.Fatalf("listen at the backend: %v", err)
	}
	t.Cleanup(func() { backend.Close() })

	peer.XDPPass(t, "veth1")
	boxMAC, peerMAC := [6]byte(box.Interface(t, "veth0").HardwareAddr), [6]byte(peer.Interface(t, "veth1").HardwareAddr)
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
		sendRaw(t, peer, "veth1", frame)
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
