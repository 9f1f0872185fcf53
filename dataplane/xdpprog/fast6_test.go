package xdpprog

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/vipd/vipd/dsr"
	"github.com/vipd/vipd/nat"
	"github.com/vipd/vipd/packet"

	"github.com/vipd/vipd/testing/nstest"
)

var (
	fastVIP6     = netip.MustParseAddr(vip6)
	fastBackend6 = netip.MustParseAddr(backend6)
)

// natEntry6 is the IPv6 entry translating address old and port oldPort
// to addr and port (0: kept), the destination's or with snat the
// source's, with the sum of package nat.
func natEntry6(t testing.TB, old, addr netip.Addr, oldPort, port uint16, gen uint32, snat bool) FastEntry6 {
	o, a := old.As16(), addr.As16()
	return FastEntry6{
		Gen: gen, Expires: monotonic(t) + uint64(time.Minute),
		Addr: a, Port: port, L4Sum: nat.Sums6(&o, &a, oldPort, port),
		MACs: fastMACs, MaxLen: 1500, SNAT: snat,
	}
}

func keyOfFrame6(f []byte) FastKey6 {
	return FastKey6{
		Src: [16]byte(f[22:38]), Dst: [16]byte(f[38:54]),
		SrcPort: binary.BigEndian.Uint16(f[54:]), DstPort: binary.BigEndian.Uint16(f[56:]),
		Proto: f[20],
	}
}

func put6(t testing.TB, f *Fast, k FastKey6, v FastEntry6) {
	t.Helper()
	w := f.NewWriter(1)
	if !w.Add6(k, &v) {
		t.Fatal("Add6 refused one entry")
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}

// translated6 is what the pipeline makes of an IPv6 frame (forward6,
// natReply6): nat.DNAT6 (SNAT: nat.SNAT6) with the entry's address and
// port, the hop limit decremented, its MACs, and the frame cut at the end
// of the IPv6 packet.
func translated6(frame []byte, v FastEntry6) []byte {
	out := append([]byte(nil), frame...)
	ip := packet.IPv6(out[14:54])
	l4 := nat.L4{Proto: out[20], Hdr: out[54 : 54+ip.PayloadLength()]}
	if v.SNAT {
		nat.SNAT6(ip, l4, &v.Addr, v.Port)
	} else {
		nat.DNAT6(ip, l4, &v.Addr, v.Port)
	}
	ip.DecHopLimit()
	copy(out, v.MACs[:])
	return out[:54+ip.PayloadLength()]
}

// checkDecoded6 decodes an IPv6 frame the fast path sent with gopacket
// and checks its addresses, hop limit, ports and transport checksum
// against a fresh computation.
func checkDecoded6(t *testing.T, out []byte, flow flowOf) {
	t.Helper()
	pkt := gopacket.NewPacket(out, layers.LayerTypeEthernet, gopacket.Default)
	eth, _ := pkt.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	ip, _ := pkt.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	if eth == nil || ip == nil {
		t.Fatalf("gopacket cannot decode the output: %v", pkt.ErrorLayer())
	}
	if !bytes.Equal(eth.DstMAC, fastMACs[:6]) || !bytes.Equal(eth.SrcMAC, fastMACs[6:]) {
		t.Errorf("MACs %v → %v", eth.SrcMAC, eth.DstMAC)
	}
	if !ip.DstIP.Equal(flow.dst.AsSlice()) || !ip.SrcIP.Equal(flow.src.AsSlice()) || ip.HopLimit != 63 {
		t.Errorf("IPv6 %v → %v hop limit %d, want %v → %v hop limit 63", ip.SrcIP, ip.DstIP, ip.HopLimit, flow.src, flow.dst)
	}
	if int(ip.Length) != len(out)-54 {
		t.Errorf("payload length %d in a frame of %d bytes", ip.Length, len(out))
	}
	l4 := append([]byte(nil), out[54:]...)
	var sport, dport, csum uint16
	csumOff := 16
	switch ip.NextHeader {
	case layers.IPProtocolTCP:
		tcp := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
		sport, dport, csum = uint16(tcp.SrcPort), uint16(tcp.DstPort), tcp.Checksum
	case layers.IPProtocolUDP:
		udp := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
		sport, dport, csum, csumOff = uint16(udp.SrcPort), uint16(udp.DstPort), udp.Checksum, 6
	default:
		t.Fatalf("next header %v", ip.NextHeader)
	}
	if sport != flow.sport || dport != flow.dport {
		t.Errorf("ports %d → %d, want %d → %d", sport, dport, flow.sport, flow.dport)
	}
	binary.BigEndian.PutUint16(l4[csumOff:], 0)
	pseudo := append(append([]byte(nil), out[22:54]...), 0, 0, byte(len(l4)>>8), byte(len(l4)), 0, 0, 0, byte(ip.NextHeader))
	want := ^fold(sum16(pseudo) + sum16(l4))
	if ip.NextHeader == layers.IPProtocolUDP && want == 0 {
		want = 0xffff
	}
	if csum != want {
		t.Errorf("%v checksum %#04x, want %#04x", ip.NextHeader, csum, want)
	}
}

// TestFastTranslates6 is TestFastTranslates for IPv6: a NAT VIP's
// client flows (DNAT) and its backend's replies (SNAT), TCP and UDP,
// ports changed and kept, 2,000 client ports each, every frame byte for
// byte the pipeline's translation, decoded by gopacket, and counted by
// its IPv6 length (40 + payload length, as vipd counts).
func TestFastTranslates6(t *testing.T) {
	p := loadFast(t, 1<<16)
	f := p.Fast()
	if err := f.SetGeneration(3); err != nil {
		t.Fatal(err)
	}
	var frames, nbytes uint64
	for _, tc := range []struct {
		name        string
		proto       layers.IPProtocol
		vport, port uint16
		payload     []byte
		trailer     int // bytes after the IPv6 packet, which the pipeline drops
	}{
		{"tcp port changed", tcp, 80, beTCP, nil, 0},
		{"tcp port kept", tcp, 80, 0, nil, 0},
		{"tcp with trailing bytes", tcp, 80, beTCP, make([]byte, 100), 6},
		{"udp port changed", udp, 53, 5353, nil, 0},
		{"udp port kept", udp, 53, 0, nil, 0},
		{"udp with trailing bytes", udp, 53, 5353, []byte("eighteen bytes...."), 3},
	} {
		for _, reply := range []bool{false, true} {
			name := tc.name
			if reply {
				name = "reply " + name
			}
			t.Run(name, func(t *testing.T) {
				bport := tc.port
				if bport == 0 {
					bport = tc.vport
				}
				v := natEntry6(t, fastVIP6, fastBackend6, tc.vport, tc.port, 3, false)
				if reply {
					vport := tc.vport
					if tc.port == 0 {
						vport = 0 // an every-port VIP: the port kept both ways
					}
					v = natEntry6(t, fastBackend6, fastVIP6, bport, vport, 3, true)
				}
				cli := netip.MustParseAddr(client6)
				for cport := uint16(1024); cport < 1024+2000; cport++ {
					in := pk{src: client6, dst: vip6, proto: tc.proto, sport: cport, dport: tc.vport, payload: tc.payload}
					want := flowOf{cli, fastBackend6, cport, bport}
					if reply {
						in = pk{src: backend6, dst: client6, proto: tc.proto, sport: bport, dport: cport, payload: tc.payload}
						want = flowOf{fastVIP6, cli, tc.vport, cport}
					}
					frame := append(in.frame(t), make([]byte, tc.trailer)...)
					put6(t, f, keyOfFrame6(frame), v)
					verdict, out := runOut(t, p, frame)
					if verdict != xdpTX {
						t.Fatalf("client port %d: verdict %s, want XDP_TX", cport, verdictName(verdict))
					}
					if w := translated6(frame, v); !bytes.Equal(out, w) {
						t.Fatalf("client port %d: the fast path wrote\n% x\nthe pipeline's translation is\n% x", cport, out, w)
					}
					checkDecoded6(t, out, want)
					frames++
					nbytes += uint64(40 + binary.BigEndian.Uint16(frame[18:]))
				}
			})
		}
	}
	if st, err := f.Stats(); err != nil || st != (FastStats{Packets: frames, Bytes: nbytes}) {
		t.Errorf("Stats = %+v, %v; want %d frames, %d bytes", st, err, frames, nbytes)
	}
}

// TestFastDeclines6 is TestFastDeclines for IPv6: each frame, of a flow
// with an entry, differs from one the program forwards by one defect,
// and must come out unchanged and not sent.
func TestFastDeclines6(t *testing.T) {
	p := loadFast(t, 16)
	f := p.Fast()
	if err := f.SetGeneration(2); err != nil {
		t.Fatal(err)
	}
	tcpFrame := pk{src: client6, dst: vip6, proto: tcp, sport: client, dport: 80}.frame(t)
	udpFrame := pk{src: client6, dst: vip6, proto: udp, sport: client, dport: 80}.frame(t)
	entry := natEntry6(t, fastVIP6, fastBackend6, 80, beTCP, 2, false)
	entry.In = loIndex(t)
	put6(t, f, keyOfFrame6(tcpFrame), entry)
	put6(t, f, keyOfFrame6(udpFrame), entry)
	// A v4 entry of the same ports: an IPv6 frame never takes it.
	put(t, f, FastKey4{SrcPort: client, DstPort: 80, Proto: 6}, fastEntry(t, 80, beTCP, 2))
	oldGen, expired, small, elsewhere := entry, entry, entry, entry
	oldGen.Gen = 1
	expired.Expires = monotonic(t) - uint64(f.ClockSlack()) - 1
	small.MaxLen = 40 + 20 + 3 // the frames carry 4 bytes of data
	elsewhere.In = loIndex(t) + 1
	flow := func(sport uint16, v FastEntry6) []byte {
		fr := pk{src: client6, dst: vip6, proto: tcp, sport: sport, dport: 80}.frame(t)
		put6(t, f, keyOfFrame6(fr), v)
		return fr
	}
	edit := func(base []byte, fn func(b []byte)) []byte {
		b := append([]byte(nil), base...)
		fn(b)
		return b
	}
	// An entry for the key a frame with extension headers would have if
	// the program read the ports past them.
	withExt := func(q pk) []byte {
		fr := q.frame(t)
		put6(t, f, FastKey6{Src: fastKeyAddr(client6), Dst: fastKeyAddr(vip6), SrcPort: client, DstPort: 80, Proto: 6}, entry)
		return fr
	}
	cases := []declined{
		{"no entry", pk{src: client6, dst: vip6, proto: tcp, sport: client + 1, dport: 80}.frame(t)},
		{"entry of an old generation", flow(2001, oldGen)},
		{"entry expired", flow(2002, expired)},
		{"longer than the entry's MTU", flow(2003, small)},
		{"entry of another interface", flow(2004, elsewhere)},
		{"SYN", edit(tcpFrame, func(b []byte) { b[67] |= 0x02 })},
		{"FIN", edit(tcpFrame, func(b []byte) { b[67] |= 0x01 })},
		{"RST", edit(tcpFrame, func(b []byte) { b[67] |= 0x04 })},
		{"hop limit 1", edit(tcpFrame, func(b []byte) { b[21] = 1 })},
		{"hop limit 0", edit(tcpFrame, func(b []byte) { b[21] = 0 })},
		{"version 4", edit(tcpFrame, func(b []byte) { b[14] = 0x40 | b[14]&0x0f })},
		{"payload length past the frame", edit(tcpFrame, func(b []byte) { binary.BigEndian.PutUint16(b[18:], 25) })},
		{"payload length short of TCP", edit(tcpFrame, func(b []byte) { binary.BigEndian.PutUint16(b[18:], 19) })},
		{"TCP data offset 4", edit(tcpFrame, func(b []byte) { b[66] = 4 << 4 })},
		{"TCP data offset past the packet", edit(tcpFrame, func(b []byte) { b[66] = 7 << 4 })}, // 28 > 24 bytes
		{"UDP length 7", edit(udpFrame, func(b []byte) { binary.BigEndian.PutUint16(b[58:], 7) })},
		{"UDP length past the packet", edit(udpFrame, func(b []byte) { binary.BigEndian.PutUint16(b[58:], 13) })},
		{"UDP without checksum", edit(udpFrame, func(b []byte) { binary.BigEndian.PutUint16(b[60:], 0) })},
		{"cut to the TCP header", tcpFrame[:54+19]},
		{"fragment header", withExt(pk{src: client6, dst: vip6, proto: tcp, sport: client, dport: 80, frag6: true})},
		{"hop-by-hop options", withExt(pk{src: client6, dst: vip6, proto: tcp, sport: client, dport: 80, hopByHop: true})},
		{"VLAN tag", pk{vlan: true, src: client6, dst: vip6, proto: tcp, sport: client, dport: 80}.frame(t)},
	}
	checkDeclines(t, p, [][]byte{tcpFrame, udpFrame}, cases)
}

func fastKeyAddr(s string) [16]byte { return netip.MustParseAddr(s).As16() }

// TestFastEncap6 runs frames of DSR flows through the program with an
// IPv6-in-IPv6 entry: each must leave byte for byte as dsr.Encap6
// wraps it (the pipeline's encap6; padding after the inner packet
// dropped), the outer header decoded by gopacket (traffic class copied,
// the entry's flow label, length, next header 41, hop limit 64,
// addresses) and the inner packet intact; counted by the inner packet's
// length, as the pipeline counts a DSR packet.
func TestFastEncap6(t *testing.T) {
	p := loadFast(t, 1<<10)
	f := p.Fast()
	esrc, be := netip.MustParseAddr("2001:2:1::fe"), fastBackend6
	var frames, nbytes uint64
	for i, tc := range []struct {
		name    string
		proto   layers.IPProtocol
		tc      uint8
		label   uint32
		payload []byte
		trailer int
	}{
		{"tcp", tcp, 0, 0x12345, nil, 0},
		{"tcp, traffic class, label", tcp, 0xb8, 0xfffff, make([]byte, 300), 0},
		{"udp, trailing bytes", udp, 0x01, 1, []byte("x"), 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := pk{src: client6, dst: vip6, proto: tc.proto, sport: uint16(3000 + i), dport: 80, payload: tc.payload}.frame(t)
			// The traffic class: the inner header's bits 4-11.
			w := binary.BigEndian.Uint32(in[14:])
			binary.BigEndian.PutUint32(in[14:], w&^0x0ff00000|uint32(tc.tc)<<20)
			in = append(in, make([]byte, tc.trailer)...)
			v := FastEntry6{Gen: 0, Expires: monotonic(t) + uint64(time.Minute), Addr: be.As16(), MACs: fastMACs,
				MaxLen: 1460, Ref: 3, Encap: true, EncapSrc: esrc.As16(), FlowLabel: tc.label}
			put6(t, f, keyOfFrame6(in), v)
			verdict, out := runOut(t, p, in)
			n := 40 + int(binary.BigEndian.Uint16(in[18:]))
			buf := make([]byte, 14+40+n)
			copy(buf[54:], in[14:14+n])
			o := dsr.Encap6(buf, 54, n, &v.EncapSrc, &v.Addr, v.FlowLabel)
			copy(buf[o-14:], fastMACs[:])
			binary.BigEndian.PutUint16(buf[o-2:], 0x86dd)
			if verdict != xdpTX || !bytes.Equal(out, buf) {
				t.Fatalf("verdict %s\n% x\nwant XDP_TX and\n% x", verdictName(verdict), out, buf)
			}
			pkt := gopacket.NewPacket(out, layers.LayerTypeEthernet, gopacket.Default)
			outer, _ := pkt.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
			if outer == nil || outer.TrafficClass != tc.tc || outer.FlowLabel != tc.label&0xfffff || int(outer.Length) != n ||
				outer.NextHeader != layers.IPProtocolIPv6 || outer.HopLimit != 64 ||
				!outer.SrcIP.Equal(esrc.AsSlice()) || !outer.DstIP.Equal(be.AsSlice()) {
				t.Fatalf("outer header %+v", outer)
			}
			if !bytes.Equal(out[54:], in[14:14+n]) {
				t.Fatal("the inner packet changed")
			}
			frames++
			nbytes += uint64(n)
		})
	}
	if got, b, ok := f.Forwarded(3); !ok || got != frames || b != nbytes {
		t.Errorf("Forwarded(3) = %d, %d, %v; want %d, %d", got, b, ok, frames, nbytes)
	}
	// Too long for the entry's MaxLen (the egress MTU less 40): declined.
	big := pk{src: client6, dst: vip6, proto: tcp, sport: 3999, dport: 80, payload: make([]byte, 1401)}.frame(t)
	v := FastEntry6{Expires: monotonic(t) + uint64(time.Minute), Addr: be.As16(), MACs: fastMACs, MaxLen: 1460, Encap: true}
	put6(t, f, keyOfFrame6(big), v)
	if verdict, out := runOut(t, p, big); verdict == xdpTX || !bytes.Equal(out, big) {
		t.Errorf("a %d-byte packet for a MaxLen of 1460: verdict %s", len(big)-14, verdictName(verdict))
	}
}

// TestFastWithoutIPv6: a fast path loaded without IPv6 (FastFlows6 0)
// has no IPv6 map, refuses IPv6 entries, leaves IPv6 frames to the
// steering rule and still forwards IPv4 ones; a program sharing it must
// ask for no IPv6 either.
func TestFastWithoutIPv6(t *testing.T) {
	nstest.RequireRoot(t)
	p, err := LoadWith(1, Options{FastFlows: 16})
	skipIfDenied(t, "BPF", err)
	if err != nil {
		t.Fatalf("LoadWith: %v", err)
	}
	defer p.Close()
	f := p.Fast()
	if f.IPv6() {
		t.Fatal("IPv6() with FastFlows6 0")
	}
	frame6 := pk{src: client6, dst: vip6, proto: tcp, sport: client, dport: 80}.frame(t)
	v6 := natEntry6(t, fastVIP6, fastBackend6, 80, beTCP, 0, false)
	if w := f.NewWriter(4); w.Add6(keyOfFrame6(frame6), &v6) {
		t.Error("Add6 queued an IPv6 entry")
	}
	if verdict, out := runOut(t, p, frame6); verdict == xdpTX || !bytes.Equal(out, frame6) {
		t.Errorf("IPv6 frame: verdict %s", verdictName(verdict))
	}
	frame4 := pk{src: client4, dst: vip4, proto: tcp, sport: client, dport: 80}.frame(t)
	put(t, f, keyOfFrame(frame4), fastEntry(t, 80, beTCP, 0))
	if verdict, _ := runOut(t, p, frame4); verdict != xdpTX {
		t.Errorf("IPv4 frame: verdict %s, want XDP_TX", verdictName(verdict))
	}
	if _, err := LoadWith(1, Options{FastFlows: 16, FastFlows6: 16, ShareFast: f}); err == nil {
		t.Error("a program shared a fast path without IPv6 as one with it")
	}
	q, err := LoadWith(1, Options{FastFlows: 16, ShareFast: f})
	if err != nil {
		t.Fatalf("LoadWith shared: %v", err)
	}
	q.Close()
	if _, err := LoadWith(1, Options{FastFlows6: 16}); err == nil {
		t.Error("IPv6 fast flows without IPv4 ones were accepted")
	}
}
