package xdpprog

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vipd/vipd/testing/nstest"
)

// TestEndToEnd attaches the program to a veth in native mode with an
// AF_XDP socket on its queue and sends real traffic from the peer's
// namespace. It sends six packets and one ping, each awaited for at most
// two seconds, all between namespaces this test created.
//
//	peer ns: veth1 198.18.0.2/24, 198.18.2.1/32 (a NAT backend)
//	box ns:  veth0 198.18.0.1/24 + vipd_steer + AF_XDP socket on queue 0
func TestEndToEnd(t *testing.T) {
	p := load(t, 1)
	box, peer := boxAndPeer(t)
	peer.Must(t, "ip", "route", "add", "198.18.1.0/24", "via", "198.18.0.1") // VIPs
	box.Must(t, "ip", "route", "add", "198.18.2.1/32", "via", "198.18.0.2")

	if err := p.Update(addrs("198.18.1.1"), []ReplyKey{{netip.MustParseAddr("198.18.2.1"), 17, 8080}}, addrs("198.18.0.1")); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if mode, err := attach(t, box, p, "veth0", Auto); err != nil || mode != Native {
		t.Fatalf("Attach(veth0, Auto) = %v, %v; want native", mode, err)
	}
	idx := box.Interface(t, "veth0").Index
	var x *xsk
	if err := box.Do(func() (err error) { x, err = newXSK(idx, 0); return err }); err != nil {
		t.Fatalf("AF_XDP socket: %v", err)
	}
	t.Cleanup(x.Close)
	if err := p.Register(0, x.fd); err != nil {
		t.Fatalf("Register: %v", err)
	}
	// The box's own UDP service: what the kernel must still get.
	var local net.PacketConn
	if err := box.Do(func() (err error) { local, err = net.ListenPacket("udp4", "198.18.0.1:9999"); return err }); err != nil {
		t.Fatalf("listen on the box: %v", err)
	}
	t.Cleanup(func() { local.Close() })

	// A ping to the box gets its answer: ARP both ways and ICMP pass.
	if err := peer.Do(func() error { return ping("198.18.0.2", "198.18.0.1") }); err != nil {
		t.Fatalf("ping the box: %v", err)
	}

	send := func(from, to string, payload string) {
		t.Helper()
		if err := peer.Do(func() error {
			c, err := net.DialUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(from)), net.UDPAddrFromAddrPort(netip.MustParseAddrPort(to)))
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write([]byte(payload))
			return err
		}); err != nil {
			t.Fatalf("send %s → %s: %v", from, to, err)
		}
	}
	expectXSK := func(what, dst, payload string) {
		t.Helper()
		f, err := x.recv(30 * time.Second)
		if err != nil {
			t.Fatalf("%s: the AF_XDP socket got nothing: %v", what, err)
		}
		pkt := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
		ip, _ := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		if ip == nil || ip.DstIP.String() != dst || !bytes.Equal(pkt.ApplicationLayer().Payload(), []byte(payload)) {
			t.Fatalf("%s: the AF_XDP socket got %v", what, pkt)
		}
	}

	send("198.18.0.2:40000", "198.18.1.1:7000", "to the VIP")
	expectXSK("packet to the VIP", "198.18.1.1", "to the VIP")
	send("198.18.2.1:8080", "198.18.3.1:40000", "NAT reply")
	expectXSK("NAT reply", "198.18.3.1", "NAT reply")

	// A backend's packet to the box itself (a health-check answer) and one
	// from another port go to the kernel, which delivers the first.
	send("198.18.2.1:8080", "198.18.0.1:9999", "health check reply")
	send("198.18.2.1:8081", "198.18.3.1:40000", "not a NAT reply")
	local.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 100)
	n, from, err := local.ReadFrom(buf)
	if err != nil || string(buf[:n]) != "health check reply" || from.String() != "198.18.2.1:8080" {
		t.Fatalf("the box's UDP service got %q from %v, %v", buf[:n], from, err)
	}
	if f, err := x.recv(200 * time.Millisecond); err == nil {
		t.Errorf("the AF_XDP socket got a frame for the kernel: %v", gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default))
	}
}

// boxAndPeer makes the two namespaces of the end-to-end tests, joined by
// a veth pair: the box with veth0 198.18.0.1/24, the peer with veth1
// 198.18.0.2/24 and 198.18.2.1/32 (a NAT backend), which routes the
// clients (198.18.3.0/24) through the box.
func boxAndPeer(t testing.TB) (box, peer *nstest.NS) {
	t.Helper()
	box, peer = newNetNS(t), newNetNS(t)
	nstest.VethNamed(t, box, "veth0", peer, "veth1")
	box.Must(t, "ip", "addr", "add", "198.18.0.1/24", "dev", "veth0")
	peer.Must(t, "ip", "addr", "add", "198.18.0.2/24", "dev", "veth1")
	peer.Must(t, "ip", "addr", "add", "198.18.2.1/32", "dev", "veth1")
	peer.Must(t, "ip", "route", "add", "198.18.3.0/24", "via", "198.18.0.1")
	return box, peer
}

// ping sends one ICMP echo request from src to dst over a raw socket and
// waits up to 30 s for the reply. It runs in the sender's namespace.
func ping(src, dst string) error {
	c, err := net.ListenPacket("ip4:icmp", src)
	if err != nil {
		return err
	}
	defer c.Close()
	buf := gopacket.NewSerializeBuffer()
	req := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0), Id: 0x7664, Seq: 1}
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true}, req, gopacket.Payload("vipd")); err != nil {
		return err
	}
	if _, err := c.WriteTo(buf.Bytes(), &net.IPAddr{IP: net.ParseIP(dst)}); err != nil {
		return err
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	b := make([]byte, 1500)
	for {
		n, from, err := c.ReadFrom(b)
		if err != nil {
			return fmt.Errorf("no echo reply: %w", err)
		}
		r := gopacket.NewPacket(b[:n], layers.LayerTypeICMPv4, gopacket.Default)
		if ic, ok := r.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4); ok && from.String() == dst &&
			ic.TypeCode.Type() == layers.ICMPv4TypeEchoReply && ic.Id == req.Id {
			return nil
		}
	}
}
