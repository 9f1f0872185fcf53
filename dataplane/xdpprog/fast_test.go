package xdpprog

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/vipd/vipd/nat"
	"github.com/vipd/vipd/packet"
	"golang.org/x/sys/unix"

	"github.com/vipd/vipd/testing/nstest"
)

// loadFast loads a Program with a fast path of n flows, closed when the
// test ends.
func loadFast(t testing.TB, n int) *Program {
	t.Helper()
	nstest.RequireRoot(t)
	p, err := LoadWith(1, Options{FastFlows: n, FastFlows6: n})
	skipIfDenied(t, "BPF", err)
	if err != nil {
		t.Fatalf("LoadWith: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

// loIndex is the loopback interface's index: BPF_PROG_TEST_RUN's frames
// come in on it (ingress_ifindex).
func loIndex(t testing.TB) uint32 {
	t.Helper()
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	return uint32(lo.Index)
}

// monotonic is CLOCK_MONOTONIC in ns, bpf_ktime_get_ns's clock.
func monotonic(t testing.TB) uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return uint64(ts.Nano())
}

// runOut runs the program on a copy of frame and returns the verdict and
// the frame as the program left it.
func runOut(t testing.TB, p *Program, frame []byte) (uint32, []byte) {
	t.Helper()
	out := make([]byte, len(frame)+256)
	opts := &ebpf.RunOptions{Data: append([]byte(nil), frame...), DataOut: out}
	v, err := p.prog.Run(opts)
	if err != nil {
		t.Fatalf("BPF_PROG_TEST_RUN: %v", err)
	}
	return v, opts.DataOut
}

var (
	fastVIP     = netip.MustParseAddr(vip4)
	fastBackend = netip.MustParseAddr(backend4)
	fastMACs    = [12]byte{0x02, 0, 0, 0, 0, 0xbe, 0x02, 0, 0, 0, 0, 0xb0}
)

// fastEntry is the entry the pipeline would compute for a flow to
// fastVIP:vport translated to fastBackend:port, with the sums of package
// nat.
func fastEntry(t testing.TB, vport, port uint16, gen uint32) FastEntry4 {
	return natEntry(t, fastVIP.As4(), fastBackend.As4(), vport, port, gen, false)
}

// snatEntry is the entry the pipeline would compute for a NAT backend's
// reply from fastBackend:bport, made to come from fastVIP:vport (vport 0:
// the port kept), as natReply4 does.
func snatEntry(t testing.TB, bport, vport uint16, gen uint32) FastEntry4 {
	return natEntry(t, fastBackend.As4(), fastVIP.As4(), bport, vport, gen, true)
}

// natEntry is an entry translating address old and port oldPort to addr
// and port (0: kept): the destination's, or with snat the source's.
func natEntry(t testing.TB, old, addr [4]byte, oldPort, port uint16, gen uint32, snat bool) FastEntry4 {
	ipSum, l4Sum := nat.Sums4(nat.AddrSum4(old, addr), oldPort, port)
	return FastEntry4{
		Gen: gen, Expires: monotonic(t) + uint64(time.Minute),
		Addr: addr, Port: port, IPSum: ipSum, L4Sum: l4Sum,
		MACs: fastMACs, MaxLen: 1500, SNAT: snat,
	}
}

func keyOfFrame(f []byte) FastKey4 {
	return FastKey4{
		Src: [4]byte(f[26:30]), Dst: [4]byte(f[30:34]),
		SrcPort: binary.BigEndian.Uint16(f[34:]), DstPort: binary.BigEndian.Uint16(f[36:]),
		Proto: f[23],
	}
}

func put(t testing.TB, f *Fast, k FastKey4, v FastEntry4) {
	t.Helper()
	w := f.NewWriter(1)
	if !w.Add(k, &v) {
		t.Fatal("Add refused one entry")
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}

// translated is what the pipeline makes of frame: nat.DNAT4Sum with the
// entry's address, port and sum (SNAT: nat.SNAT4 with its address and
// port), and its MACs.
func translated(frame []byte, v FastEntry4) []byte {
	out := append([]byte(nil), frame...)
	ip := out[14:]
	l4 := nat.L4{Proto: ip[9], Hdr: ip[20:]}
	if v.SNAT {
		nat.SNAT4(packet.IPv4(ip[:20]), l4, v.Addr, v.Port)
	} else {
		sum := nat.AddrSum4([4]byte(ip[16:20]), v.Addr)
		nat.DNAT4Sum(packet.IPv4(ip[:20]), l4, v.Addr, sum, v.Port)
	}
	copy(out, v.MACs[:])
	return out
}

// flowOf is what a frame the fast path sent must carry.
type flowOf struct {
	src, dst     netip.Addr
	sport, dport uint16
}

// checkDecoded decodes a frame the fast path sent with gopacket and checks
// every field against the flow, the TTL, and both checksums against a
// fresh computation.
func checkDecoded(t *testing.T, out []byte, flow flowOf) {
	t.Helper()
	pkt := gopacket.NewPacket(out, layers.LayerTypeEthernet, gopacket.Default)
	eth, _ := pkt.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	ip, _ := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if eth == nil || ip == nil {
		t.Fatalf("gopacket cannot decode the output: %v", pkt.ErrorLayer())
	}
	if !bytes.Equal(eth.DstMAC, fastMACs[:6]) || !bytes.Equal(eth.SrcMAC, fastMACs[6:]) {
		t.Errorf("MACs %v → %v", eth.SrcMAC, eth.DstMAC)
	}
	if !ip.DstIP.Equal(flow.dst.AsSlice()) || !ip.SrcIP.Equal(flow.src.AsSlice()) || ip.TTL != 63 {
		t.Errorf("IPv4 %v → %v TTL %d, want %v → %v TTL 63", ip.SrcIP, ip.DstIP, ip.TTL, flow.src, flow.dst)
	}
	hdr := append([]byte(nil), out[14:34]...)
	binary.BigEndian.PutUint16(hdr[10:], 0)
	if want := ^fold(sum16(hdr)); want != ip.Checksum {
		t.Errorf("IPv4 checksum %#04x, want %#04x", ip.Checksum, want)
	}
	l4 := append([]byte(nil), out[34:]...)
	var sport, dport uint16
	var csum uint16
	csumOff := 16
	switch ip.Protocol {
	case layers.IPProtocolTCP:
		tcp := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
		sport, dport, csum = uint16(tcp.SrcPort), uint16(tcp.DstPort), tcp.Checksum
	case layers.IPProtocolUDP:
		udp := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
		sport, dport, csum, csumOff = uint16(udp.SrcPort), uint16(udp.DstPort), udp.Checksum, 6
	}
	if sport != flow.sport || dport != flow.dport {
		t.Errorf("ports %d → %d, want %d → %d", sport, dport, flow.sport, flow.dport)
	}
	if ip.Protocol == layers.IPProtocolUDP && csum == 0 {
		return // none sent, none to check
	}
	binary.BigEndian.PutUint16(l4[csumOff:], 0)
	pseudo := append(append(append([]byte(nil), out[26:34]...), 0, byte(ip.Protocol)), byte(len(l4)>>8), byte(len(l4)))
	want := ^fold(sum16(pseudo) + sum16(l4))
	if ip.Protocol == layers.IPProtocolUDP && want == 0 {
		want = 0xffff
	}
	if csum != want {
		t.Errorf("%v checksum %#04x, want %#04x", ip.Protocol, csum, want)
	}
}

// sum16 is the plain sum of b's 16-bit big-endian words (b padded with a
// zero byte to even length): an independent reference, not package
// packet's.
func sum16(b []byte) uint32 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	return s
}

// TestFastTranslates runs frames of flows that have an entry through the
// program and checks that it sends them back out (XDP_TX) exactly as the
// pipeline's translation (nat.DNAT4Sum) would, byte for byte, and that
// gopacket decodes them with valid checksums. The client ports sweep
// every L4 checksum value around the edges: an incremental update that
// mishandles 0x0000 or 0xffff, or a UDP checksum that ends 0, shows up.
func TestFastTranslates(t *testing.T) {
	p := loadFast(t, 1<<16)
	f := p.Fast()
	if err := f.SetGeneration(7); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		proto       layers.IPProtocol
		vport, port uint16
		zeroUDP     bool
		payload     []byte
	}{
		{"tcp port changed", tcp, 80, beTCP, false, nil},
		{"tcp port kept", tcp, 80, 0, false, nil},
		{"tcp unpadded", tcp, 80, beTCP, false, make([]byte, 100)},
		{"udp port changed", udp, 53, 5353, false, nil},
		{"udp port kept", udp, 53, 0, false, nil},
		{"udp without checksum", udp, 53, 5353, true, nil},
		{"udp unpadded", udp, 53, 5353, false, []byte("eighteen bytes....")},
	} {
		for _, reply := range []bool{false, true} {
			name := tc.name
			if reply {
				name = "reply " + name
			}
			t.Run(name, func(t *testing.T) { checkTranslates(t, p, tc.proto, tc.vport, tc.port, tc.zeroUDP, tc.payload, reply) })
		}
	}
}

// checkTranslates runs TestFastTranslates' case: 2,000 flows to VIP port
// vport translated to backend port port (0: kept), or (reply) the
// backend's replies from it made to come from the VIP.
func checkTranslates(t *testing.T, p *Program, proto layers.IPProtocol, vport, port uint16, zeroUDP bool, payload []byte, reply bool) {
	f := p.Fast()
	bport := port
	if bport == 0 {
		bport = vport
	}
	v := fastEntry(t, vport, port, 7)
	if reply && port == 0 {
		v = snatEntry(t, bport, 0, 7) // an every-port VIP: the port kept both ways
	} else if reply {
		v = snatEntry(t, bport, vport, 7)
	}
	cli := netip.MustParseAddr(client4)
	for cport := uint16(1024); cport < 1024+2000; cport++ {
		in := pk{src: client4, dst: vip4, proto: proto, sport: cport, dport: vport, payload: payload}
		want := flowOf{cli, fastBackend, cport, bport}
		if reply {
			in = pk{src: backend4, dst: client4, proto: proto, sport: bport, dport: cport, payload: payload}
			want = flowOf{fastVIP, cli, vport, cport}
		}
		frame := in.frame(t)
		if zeroUDP {
			binary.BigEndian.PutUint16(frame[40:], 0)
		}
		put(t, f, keyOfFrame(frame), v)
		verdict, out := runOut(t, p, frame)
		if verdict != xdpTX {
			t.Fatalf("client port %d: verdict %s, want XDP_TX", cport, verdictName(verdict))
		}
		w := translated(frame, v)
		w = w[:14+binary.BigEndian.Uint16(w[16:])] // the pipeline drops Ethernet padding
		if !bytes.Equal(out, w) {
			t.Fatalf("client port %d: the fast path wrote\n% x\nthe pipeline's translation is\n% x", cport, out, w)
		}
		checkDecoded(t, out, want)
	}
}

// TestFastChecksumSweep runs one flow's frames through the program with a
// 16-bit payload word taking every value, so that the L4 checksum before
// and after the translation takes every value too (0x0000 and 0xffff
// included), and compares each with the pipeline's translation: a
// client's flow (DNAT) and a NAT backend's replies (SNAT), IPv4 and IPv6.
func TestFastChecksumSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("524,288 program runs")
	}
	p := loadFast(t, 16)
	f := p.Fast()
	for _, c := range []struct {
		proto     layers.IPProtocol
		reply, v6 bool
	}{{tcp, false, false}, {udp, false, false}, {tcp, true, false}, {udp, true, false},
		{tcp, false, true}, {udp, false, true}, {tcp, true, true}, {udp, true, true}} {
		proto, reply, v6 := c.proto, c.reply, c.v6
		cli, vip, be := client4, vip4, backend4
		if v6 {
			cli, vip, be = client6, vip6, backend6
		}
		in := pk{src: cli, dst: vip, proto: proto, sport: client, dport: 80, payload: make([]byte, 18)}
		if reply {
			in = pk{src: be, dst: cli, proto: proto, sport: beTCP, dport: client, payload: make([]byte, 18)}
		}
		frame := in.frame(t)
		var translate func([]byte) []byte
		switch {
		case v6:
			v := natEntry6(t, fastVIP6, fastBackend6, 80, beTCP, 0, false)
			if reply {
				v = natEntry6(t, fastBackend6, fastVIP6, beTCP, 80, 0, true)
			}
			put6(t, f, keyOfFrame6(frame), v)
			translate = func(b []byte) []byte { return translated6(b, v) }
		default:
			v := fastEntry(t, 80, beTCP, 0)
			if reply {
				v = snatEntry(t, beTCP, 80, 0)
			}
			put(t, f, keyOfFrame(frame), v)
			translate = func(b []byte) []byte { return translated(b, v) }
		}
		l4 := 14 + 20
		if v6 {
			l4 = 14 + 40
		}
		word, csum := l4+20+16, l4+16 // the payload's last word (TCP)
		if proto == udp {
			word, csum = l4+8+16, l4+6
		}
		base := binary.BigEndian.Uint16(frame[csum:])
		seen0, seenF := false, false
		for x := range 1 << 16 {
			in := append([]byte(nil), frame...)
			binary.BigEndian.PutUint16(in[word:], uint16(x))
			// Keep the checksum valid: the word grew by x from 0.
			c := packet.ChecksumAdd(base, uint32(x))
			if proto == udp && c == 0 {
				c = 0xffff
			}
			binary.BigEndian.PutUint16(in[csum:], c)
			verdict, out := runOut(t, p, in)
			if want := translate(in); verdict != xdpTX || !bytes.Equal(out, want) {
				t.Fatalf("%v (reply %v, IPv6 %v), payload word %#04x: verdict %s\n% x\nwant\n% x", proto, reply, v6, x, verdictName(verdict), out, want)
			}
			got := binary.BigEndian.Uint16(out[csum:])
			seen0, seenF = seen0 || got == 0, seenF || got == 0xffff
		}
		// An incremental update yields 0xffff only from a zero sum; UDP
		// sends a computed 0 as 0xffff and never 0.
		if proto == tcp && !seen0 || proto == udp && (seen0 || !seenF) {
			t.Errorf("%v (reply %v, IPv6 %v): checksums 0x0000 seen %v, 0xffff seen %v", proto, reply, v6, seen0, seenF)
		}
	}
}

// TestFastCounters checks the counters, in all (Stats) and per backend
// reference (Forwarded): packets, and bytes as IPv4 total lengths (what
// the pipeline counts per backend); the frames it declines are not
// counted.
func TestFastCounters(t *testing.T) {
	p := loadFast(t, 16)
	f := p.Fast()
	frame := pk{src: client4, dst: vip4, proto: tcp, sport: client, dport: 80}.frame(t)
	v := fastEntry(t, 80, beTCP, 0)
	v.Ref = 5
	put(t, f, keyOfFrame(frame), v)
	// A flow of a backend past the counted references: forwarded, and
	// counted in the totals alone.
	far := pk{src: client4, dst: vip4, proto: tcp, sport: client + 1, dport: 80}.frame(t)
	v.Ref = MaxFastRefs
	put(t, f, keyOfFrame(far), v)
	if verdict, _ := runOut(t, p, far); verdict != xdpTX {
		t.Fatalf("the flow of reference %d: verdict %s", MaxFastRefs, verdictName(verdict))
	}
	const n = 25
	fin := append([]byte(nil), frame...)
	fin[47] |= 0x01
	for range n {
		if v, _ := runOut(t, p, fin); v == xdpTX {
			t.Fatal("a FIN was forwarded")
		}
		if v, _ := runOut(t, p, frame); v != xdpTX {
			t.Fatalf("verdict %s, want XDP_TX", verdictName(v))
		}
	}
	st, err := f.Stats()
	if err != nil {
		t.Fatal(err)
	}
	l := uint64(binary.BigEndian.Uint16(frame[16:]))
	if want := (FastStats{Packets: n + 1, Bytes: (n + 1) * l}); st != want {
		t.Errorf("Stats = %+v, want %+v", st, want)
	}
	if p, b, ok := f.Forwarded(5); !ok || p != n || b != n*l {
		t.Errorf("Forwarded(5) = %d, %d, %v; want %d, %d", p, b, ok, n, n*l)
	}
	if p, b, ok := f.Forwarded(4); !ok || p != 0 || b != 0 {
		t.Errorf("Forwarded(4) = %d, %d, %v; want nothing", p, b, ok)
	}
	if _, _, ok := f.Forwarded(MaxFastRefs); ok {
		t.Errorf("Forwarded(%d) counts", MaxFastRefs)
	}
}

// reChecksum recomputes the IPv4 header checksum of frame after a test
// changed the header, so that only the intended defect remains.
func reChecksum(frame []byte) {
	ihl := int(frame[14]&0x0f) * 4
	binary.BigEndian.PutUint16(frame[24:], 0)
	binary.BigEndian.PutUint16(frame[24:], ^fold(sum16(frame[14:14+ihl])))
}

// TestFastDeclines runs frames the fast path must leave to vipd through a
// program whose flow map has an entry for their flow: each must come out
// unchanged, with the steering program's verdict (XDP_PASS here, no
// socket being registered), never XDP_TX.
func TestFastDeclines(t *testing.T) {
	p := loadFast(t, 16)
	f := p.Fast()
	if err := f.SetGeneration(2); err != nil {
		t.Fatal(err)
	}
	tcpFrame := pk{src: client4, dst: vip4, proto: tcp, sport: client, dport: 80}.frame(t)
	udpFrame := pk{src: client4, dst: vip4, proto: udp, sport: client, dport: 80}.frame(t)
	entry := fastEntry(t, 80, beTCP, 2)
	entry.In = loIndex(t) // where the test runs' frames come in
	put(t, f, keyOfFrame(tcpFrame), entry)
	put(t, f, keyOfFrame(udpFrame), entry)
	// Flows whose entries are stale in one way each.
	oldGen, expired, small, elsewhere := entry, entry, entry, entry
	oldGen.Gen = 1
	expired.Expires = monotonic(t) - uint64(f.ClockSlack()) - 1
	small.MaxLen = 40
	elsewhere.In = loIndex(t) + 1
	flow := func(sport uint16, v FastEntry4) []byte {
		fr := pk{src: client4, dst: vip4, proto: tcp, sport: sport, dport: 80}.frame(t)
		put(t, f, keyOfFrame(fr), v)
		return fr
	}
	edit := func(base []byte, fn func(b []byte)) []byte {
		b := append([]byte(nil), base...)
		fn(b)
		return b
	}
	header := func(base []byte, fn func(b []byte)) []byte {
		return edit(base, func(b []byte) { fn(b); reChecksum(b) })
	}
	cases := []declined{
		{"no entry", pk{src: client4, dst: vip4, proto: tcp, sport: client + 1, dport: 80}.frame(t)},
		{"entry of an old generation", flow(2001, oldGen)},
		{"entry expired", flow(2002, expired)},
		{"longer than the entry's MTU", flow(2003, small)},
		{"entry of another interface", flow(2004, elsewhere)},
		{"SYN", edit(tcpFrame, func(b []byte) { b[47] |= 0x02 })},
		{"FIN", edit(tcpFrame, func(b []byte) { b[47] |= 0x01 })},
		{"RST", edit(tcpFrame, func(b []byte) { b[47] |= 0x04 })},
		{"TTL 1", header(tcpFrame, func(b []byte) { b[22] = 1 })},
		{"TTL 0", header(tcpFrame, func(b []byte) { b[22] = 0 })},
		{"more fragments", header(tcpFrame, func(b []byte) { b[20] |= 0x20 })},
		{"fragment offset", header(tcpFrame, func(b []byte) { b[21] = 1 })},
		{"bad header checksum", edit(tcpFrame, func(b []byte) { b[24] ^= 0x40 })},
		{"total length past the frame", header(tcpFrame, func(b []byte) { binary.BigEndian.PutUint16(b[16:], 47) })},
		{"total length short of TCP", header(tcpFrame, func(b []byte) { binary.BigEndian.PutUint16(b[16:], 39) })},
		{"TCP data offset 4", edit(tcpFrame, func(b []byte) { b[46] = 4 << 4 })},
		{"TCP data offset past the packet", edit(tcpFrame, func(b []byte) { b[46] = 7 << 4 })}, // 28 > 24 bytes
		{"UDP length 7", edit(udpFrame, func(b []byte) { binary.BigEndian.PutUint16(b[38:], 7) })},
		{"UDP length past the packet", edit(udpFrame, func(b []byte) { binary.BigEndian.PutUint16(b[38:], 13) })},
		{"cut to the TCP header", tcpFrame[:14+20+19]},
		{"IPv4 options", pk{src: client4, dst: vip4, proto: tcp, sport: client, dport: 80, optWords: 1}.frame(t)},
		{"VLAN tag", pk{vlan: true, src: client4, dst: vip4, proto: tcp, sport: client, dport: 80}.frame(t)},
		{"IPv6", pk{src: client6, dst: vip6, proto: tcp, sport: client, dport: 80}.frame(t)},
	}
	checkDeclines(t, p, [][]byte{tcpFrame, udpFrame}, cases)
}

// declined is a frame the fast path must leave alone.
type declined struct {
	name  string
	frame []byte
}

// checkDeclines runs TestFastDeclines' frames: the untouched frames are
// forwarded (the cases differ from them by their defect alone), and
// every case comes out unchanged, not sent.
func checkDeclines(t *testing.T, p *Program, untouched [][]byte, cases []declined) {
	t.Helper()
	for _, fr := range untouched {
		if v, _ := runOut(t, p, fr); v != xdpTX {
			t.Fatalf("the unchanged frame: verdict %s, want XDP_TX", verdictName(v))
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, out := runOut(t, p, tc.frame)
			if v == xdpTX || v == xdpRedirect && out[0] == fastMACs[0] && out[5] == fastMACs[5] {
				t.Fatalf("verdict %s: the fast path took it", verdictName(v))
			}
			if !bytes.Equal(out, tc.frame) {
				t.Errorf("verdict %s, frame changed:\n% x\nwas\n% x", verdictName(v), out, tc.frame)
			}
		})
	}
}

// TestFastRedirect checks that an entry with an egress interface leaves
// by bpf_redirect (XDP_REDIRECT; BPF_PROG_TEST_RUN does not carry it out)
// with the frame translated.
func TestFastRedirect(t *testing.T) {
	p := loadFast(t, 16)
	frame := pk{src: client4, dst: vip4, proto: tcp, sport: client, dport: 80}.frame(t)
	v := fastEntry(t, 80, beTCP, 0)
	v.Ifindex = 1 // loopback, always there
	put(t, p.Fast(), keyOfFrame(frame), v)
	verdict, out := runOut(t, p, frame)
	want := translated(frame, v)
	want = want[:14+binary.BigEndian.Uint16(want[16:])]
	if verdict != xdpRedirect || !bytes.Equal(out, want) {
		t.Fatalf("verdict %s, frame\n% x\nwant XDP_REDIRECT and\n% x", verdictName(verdict), out, want)
	}
}

// TestFastShared loads a second program on the first one's fast path
// maps (Options.ShareFast, a two-armed vipd's second interface): an entry
// written through the first is forwarded by the second and counted in
// the shared counters; a size other than the map's is refused.
func TestFastShared(t *testing.T) {
	p := loadFast(t, 16)
	f := p.Fast()
	if _, err := LoadWith(1, Options{FastFlows: 32, FastFlows6: 16, ShareFast: f}); err == nil {
		t.Error("LoadWith shared a 16-flow map as 32 flows")
	}
	q, err := LoadWith(1, Options{FastFlows: 16, FastFlows6: 16, ShareFast: f})
	if err != nil {
		t.Fatalf("LoadWith shared: %v", err)
	}
	t.Cleanup(func() { q.Close() })
	frame := pk{src: backend4, dst: client4, proto: tcp, sport: beTCP, dport: client}.frame(t)
	v := snatEntry(t, beTCP, 80, 0)
	v.In, v.Ref = loIndex(t), 9
	put(t, f, keyOfFrame(frame), v)
	verdict, out := runOut(t, q, frame)
	want := translated(frame, v)
	want = want[:14+binary.BigEndian.Uint16(want[16:])]
	if verdict != xdpTX || !bytes.Equal(out, want) {
		t.Fatalf("the second program: verdict %s\n% x\nwant XDP_TX and\n% x", verdictName(verdict), out, want)
	}
	if n, _, _ := q.Fast().Forwarded(9); n != 1 {
		t.Errorf("the second program's view of slot 9: %d frames, want 1", n)
	}
	if st, err := f.Stats(); err != nil || st.Packets != 1 {
		t.Errorf("the first program's totals: %+v, %v; want 1 frame", st, err)
	}
	if err := q.Fast().SetGeneration(1); err != nil {
		t.Fatal(err)
	}
	if verdict, _ := runOut(t, p, frame); verdict == xdpTX {
		t.Error("the first program forwarded an entry of the generation the second retired")
	}
}

// TestFastShortFrames: frames without Ethernet padding (a veth carries
// them), as short as their headers allow: a UDP frame shorter than a TCP
// header would need is still forwarded (the protocol is read before the
// length it needs is checked), and TCP or UDP cut short of its header is
// not.
func TestFastShortFrames(t *testing.T) {
	p := loadFast(t, 16)
	f := p.Fast()
	for _, tc := range []struct {
		name    string
		proto   layers.IPProtocol
		payload int
		cut     int // bytes cut off the end of the unpadded frame
		taken   bool
	}{
		{"udp, 2 bytes of data", udp, 2, 0, true},
		{"udp, no data", udp, 0, 0, true},
		{"udp, cut into its header", udp, 0, 1, false},
		{"tcp, no data", tcp, 0, 0, true},
		{"tcp, cut into its header", tcp, 0, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frame := pk{src: client4, dst: vip4, proto: tc.proto, sport: client, dport: 80, payload: make([]byte, tc.payload)}.frame(t)
			frame = frame[:14+int(binary.BigEndian.Uint16(frame[16:]))-tc.cut]
			v := fastEntry(t, 80, beTCP, 0)
			put(t, f, keyOfFrame(frame), v)
			verdict, out := runOut(t, p, frame)
			if !tc.taken {
				if verdict == xdpTX || !bytes.Equal(out, frame) {
					t.Fatalf("%d-byte frame: verdict %s, changed %v", len(frame), verdictName(verdict), !bytes.Equal(out, frame))
				}
				return
			}
			if want := translated(frame, v); verdict != xdpTX || !bytes.Equal(out, want) {
				t.Fatalf("%d-byte frame: verdict %s\n% x\nwant XDP_TX and\n% x", len(frame), verdictName(verdict), out, want)
			}
		})
	}
}
