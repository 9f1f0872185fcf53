package daemon

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// TestICMPErrorReachesPinnedBackend: a flow pinned to a backend on one
// worker, the backend drained (its flows stay, Maglev picks the other
// one), and a fragmentation-needed error about the flow received on the
// other worker's queue: the error must reach the drained backend that still
// serves the flow, not Maglev's new pick.
func TestICMPErrorReachesPinnedBackend(t *testing.T) {
	td := start(t, testConfig)
	const cport = 40077
	pinned := td.send(syn(t, "198.18.0.100", cport, "S"))
	if err := td.d.SetDrain("web", netip.AddrPortFrom(pinned, 8080).String(), true, ""); err != nil {
		t.Fatal(err)
	}

	// The error: a router tells the VIP that its packet to the client was
	// too big. It quotes VIP:80 → client:cport.
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 0x20}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 0x10}, EthernetType: layers.EthernetTypeIPv4}
	vip, client := net.IP{198, 18, 0, 100}, net.IP{198, 18, 0, 1}
	qip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, Flags: layers.IPv4DontFragment, SrcIP: vip, DstIP: client}
	qtcp := &layers.TCP{SrcPort: 80, DstPort: cport, ACK: true, Window: 100}
	qtcp.SetNetworkLayerForChecksum(qip)
	qb := gopacket.NewSerializeBuffer()
	gopacket.SerializeLayers(qb, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, qip, qtcp, gopacket.Payload(make([]byte, 1400)))
	ip := &layers.IPv4{Version: 4, TTL: 60, Protocol: layers.IPProtocolICMPv4, SrcIP: net.IP{198, 18, 0, 250}, DstIP: vip}
	ic := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(3, 4), Seq: 1300}
	buf := gopacket.NewSerializeBuffer()
	gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, ic, gopacket.Payload(qb.Bytes()[:20+8]))

	td.plat.queues[1].Inject(buf.Bytes(), 0)
	deadline := time.After(30 * time.Second)
	for {
		var data []byte
		select {
		case f := <-td.plat.queues[0].Output():
			data = f.Data
		case f := <-td.plat.queues[1].Output():
			data = f.Data
		case <-deadline:
			t.Fatal("the error was not forwarded")
		}
		p := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
		if p.Layer(layers.LayerTypeICMPv4) == nil {
			continue
		}
		dst, _ := netip.AddrFromSlice(p.Layer(layers.LayerTypeIPv4).(*layers.IPv4).DstIP.To4())
		if dst != pinned {
			t.Fatalf("frag-needed steered to %v; the flow is pinned to %v", dst, pinned)
		}
		return
	}
}
