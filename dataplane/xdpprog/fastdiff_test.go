package xdpprog

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/vipd/vipd/conntrack"
	"github.com/vipd/vipd/dataplane"
)

type layerProto = layers.IPProtocol

// offers is a dataplane.FastPath that keeps what a worker offers.
type offers struct{ flows []dataplane.FastFlow }

func (o *offers) Offer(f *dataplane.FastFlow) bool        { o.flows = append(o.flows, *f); return true }
func (o *offers) Flush() error                            { return nil }
func (o *offers) Forwarded(uint32) (uint64, uint64, bool) { return 0, 0, false }
func (o *offers) IPv6() bool                              { return true }

// entryOf is the program's entry for a flow a worker offered, as the
// FlowWriter makes it (workerpath.go): an egress port other than the
// receiving one is an interface to redirect to, here the loopback.
func entryOf(t testing.TB, f dataplane.FastFlow) (FastKey4, FastEntry4) {
	v := FastEntry4{Gen: f.Gen, Expires: monotonic(t) + 60e9, Addr: f.Addr, Port: f.Port,
		IPSum: f.IPSum, L4Sum: f.L4Sum, MACs: f.MACs, MaxLen: f.MaxLen, Ref: f.Slot,
		SNAT: f.SNAT, Encap: f.Encap, EncapSrc: f.EncapSrc, OuterSum: f.OuterSum,
		GUE: f.GUE, GUESrcPort: f.GUESrcPort, GUEDstPort: f.GUEDstPort}
	if f.TxPort != f.RxPort {
		v.Ifindex = 1
	}
	return FastKey4{Src: f.Src, Dst: f.Dst, SrcPort: f.SrcPort, DstPort: f.DstPort, Proto: f.Proto}, v
}

// entryOf6 is entryOf for an IPv6 flow (f.V6).
func entryOf6(t testing.TB, f dataplane.FastFlow) (FastKey6, FastEntry6) {
	v := FastEntry6{Gen: f.Gen, Expires: monotonic(t) + 60e9, Addr: f.Addr6, Port: f.Port,
		L4Sum: f.L4Sum, MACs: f.MACs, MaxLen: f.MaxLen, Ref: f.Slot, SNAT: f.SNAT,
		Encap: f.Encap, EncapSrc: f.EncapSrc6, FlowLabel: f.FlowLabel}
	if f.TxPort != f.RxPort {
		v.Ifindex = 1
	}
	return FastKey6{Src: f.Src6, Dst: f.Dst6, SrcPort: f.SrcPort, DstPort: f.DstPort, Proto: f.Proto}, v
}

// runPipeline runs frame through worker w, received on the ingress port at
// now (ns), and returns the verdict and the frame as the worker left it.
func runPipeline(w *dataplane.Worker, snap *dataplane.Snapshot, now int64, frame []byte) (dataplane.Verdict, []byte) {
	buf := make([]byte, dataplane.Headroom+len(frame))
	copy(buf[dataplane.Headroom:], frame)
	d := &dataplane.Desc{Buf: buf, Off: dataplane.Headroom, Len: len(frame), RxPort: dataplane.PortIngress}
	w.Begin(snap, now, nil)
	w.Process(d)
	w.End(1)
	return d.Verdict, d.Buf[d.Off : d.Off+d.Len]
}

// TestFastAgreesWithPipeline is the fast path's differential test: for
// every frame of the steering corpus that a worker, seeing it a second
// time, offers to the fast path (a client's packet of a NAT or DSR VIP, a
// NAT backend's reply), the program given that offer must
// forward the frame exactly as the worker did; and for variants of it —
// random bytes of the first 64 changed, the IPv4 header checksum made
// valid again for half of them — the program must either leave the frame
// alone or forward it exactly as a worker forwards the variant (a worker
// that has seen the flow, and every variant before it, as the fast path
// would have let it). Every byte of every frame goes through the kernel
// (BPF_PROG_TEST_RUN) and through the pipeline.
func TestFastAgreesWithPipeline(t *testing.T) {
	p := loadFast(t, 1<<12)
	spec := diffSpec()
	snap, err := dataplane.NewSnapshot(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Fast().SetGeneration(snap.Generation()); err != nil {
		t.Fatal(err)
	}
	// The steering corpus, and client packets of every IPv4 NAT VIP of
	// diffSpec and of its IPv4 DSR VIP: TCP and UDP, padded (short) and
	// not, on many ports.
	corpus := diffCorpus(t, spec, 12000)
	for i, v := range []struct {
		dst   string
		proto layerProto
		port  uint16
	}{{"198.18.0.100", tcp, 80}, {"198.18.0.102", udp, 7000}, {"198.18.0.103", tcp, 8443}, {"198.18.0.104", tcp, 80}, {"198.18.0.104", tcp, 443},
		{"198.18.0.101", tcp, 80}, {"198.18.0.105", tcp, 80}, {"198.18.0.106", tcp, 80}} { // the last three DSR: IPIP, GUE, IPIP from a source per flow
		for j := range 30 {
			corpus = append(corpus, pk{src: "198.18.0.1", dst: v.dst, proto: v.proto, sport: uint16(40000 + 100*i + j), dport: v.port,
				payload: make([]byte, j*7)}.frame(t))
		}
	}
	// Client packets of its IPv6 NAT and DSR VIPs, and the NAT backends'
	// replies.
	for i, v := range []struct {
		src, dst     string
		proto        layerProto
		sport, dport uint16
	}{{client6, "2001:2::100", tcp, 0, 80}, {client6, "2001:2::102", udp, 0, 53}, {client6, "2001:2::101", tcp, 0, 80},
		{"2001:2:1::12", client6, tcp, 8080, 0}, {"2001:2:1::32", client6, udp, 5353, 0}} {
		for j := range 30 {
			sport, dport := v.sport, v.dport
			if sport == 0 {
				sport = uint16(41000 + 100*i + j)
			} else {
				dport = uint16(51000 + 100*i + j)
			}
			corpus = append(corpus, pk{src: v.src, dst: v.dst, proto: v.proto, sport: sport, dport: dport, payload: make([]byte, j*7)}.frame(t))
		}
	}
	// And NAT backends' replies of each IPv4 NAT VIP.
	for i, b := range []struct {
		src   string
		proto layerProto
		port  uint16
	}{{"198.18.1.12", tcp, 8080}, {"198.18.1.31", udp, 7001}, {"198.18.1.43", tcp, 8443}, {"198.18.1.51", tcp, 80}, {"198.18.1.52", tcp, 8443}} {
		for j := range 30 {
			corpus = append(corpus, pk{src: b.src, dst: "198.18.0.1", proto: b.proto, sport: b.port, dport: uint16(50000 + 100*i + j),
				payload: make([]byte, j*7)}.frame(t))
		}
	}
	r := rand.New(rand.NewPCG(7, 7))
	const variants = 40
	handed, encapsulated, gue, replies, v6, taken, declined := 0, 0, 0, 0, 0, 0, 0
	for i, frame := range corpus {
		if len(frame) < ethHdrLen {
			continue
		}
		ct, err := conntrack.New(conntrack.Config{Capacity: 64, Shards: 1})
		if err != nil {
			t.Fatal(err)
		}
		w := dataplane.NewWorker(ct.Shard(0), dataplane.WorkerOptions{})
		o := &offers{}
		w.SetFastPath(o, false)
		now := int64(1e9)
		runPipeline(w, snap, now, frame)
		now += 1e9
		verdict, out := runPipeline(w, snap, now, frame)
		if len(o.flows) == 0 {
			continue
		}
		handed++
		f := o.flows[len(o.flows)-1]
		if f.Encap {
			encapsulated++
		}
		if f.GUE {
			gue++
		}
		if f.SNAT {
			replies++
		}
		if f.V6 {
			v6++
			k, v := entryOf6(t, f)
			put6(t, p.Fast(), k, v)
		} else {
			k, v := entryOf(t, f)
			put(t, p.Fast(), k, v)
		}
		got, gotOut := runOut(t, p, frame)
		if (got != xdpTX && got != xdpRedirect) || verdict != dataplane.VerdictTX || !bytes.Equal(gotOut, out) {
			t.Fatalf("frame %d, offered by the worker: program %s, worker %v\nprogram % x\nworker  % x", i, verdictName(got), verdict, gotOut, out)
		}
		switch {
		case f.V6 && f.Encap:
			checkOuter6(t, gotOut, frame)
		case f.V6:
			checkTransport6(t, gotOut, sum6(frame) == 0xffff)
		default:
			checkOuter(t, gotOut)
		}
		for range variants {
			x := append([]byte(nil), frame...)
			for range 1 + r.IntN(2) {
				x[r.IntN(min(len(x), 64))] ^= byte(1 + r.IntN(255))
			}
			if r.IntN(2) == 0 && len(x) >= ethHdrLen+ipv4MinLen && x[ethHdrLen] == 0x45 {
				reChecksum(x)
			}
			if len(x) < ethHdrLen {
				continue
			}
			got, gotOut := runOut(t, p, x)
			if got != xdpTX && got != xdpRedirect {
				declined++
				if !bytes.Equal(gotOut, x) {
					t.Fatalf("frame %d variant: declined (%s) but changed\n% x\nwas\n% x", i, verdictName(got), gotOut, x)
				}
				continue
			}
			taken++
			now += 1e9
			wv, wout := runPipeline(w, snap, now, x)
			if wv != dataplane.VerdictTX || !bytes.Equal(gotOut, wout) {
				t.Fatalf("frame %d variant: the program forwarded it (%s), the worker: %v\nprogram % x\nworker  % x\ninput   % x",
					i, verdictName(got), wv, gotOut, wout, x)
			}
		}
	}
	t.Logf("%d frames of %d offered (%d of DSR VIPs, %d in GUE; %d NAT replies; %d IPv6); of their variants the program forwarded %d (all as the workers), left %d",
		handed, len(corpus), encapsulated, gue, replies, v6, taken, declined)
	if handed < 150 || encapsulated < 110 || gue < 28 || replies < 140 || v6 < 140 || taken < 2000 {
		t.Errorf("the corpus exercised too little: %d frames offered, %d variants forwarded", handed, taken)
	}
}

// checkOuter decodes a frame the fast path sent with gopacket and checks
// its IPv4 header independently: length and checksum recomputed, and for
// GUE the UDP header's length and zero checksum, and the inner packet's
// version.
func checkOuter(t *testing.T, frame []byte) {
	t.Helper()
	pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	ip, _ := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if ip == nil {
		t.Fatalf("gopacket finds no IPv4 header in % x", frame)
	}
	if int(ip.Length) != len(frame)-14 {
		t.Fatalf("IPv4 total length %d, the frame carries %d", ip.Length, len(frame)-14)
	}
	hdr := append([]byte(nil), frame[14:34]...)
	binary.BigEndian.PutUint16(hdr[10:], 0)
	if want := ^fold(sum16(hdr)); want != ip.Checksum {
		t.Fatalf("IPv4 checksum %#04x, want %#04x", ip.Checksum, want)
	}
	if ip.Protocol == layers.IPProtocolUDP && ip.SrcIP.Equal(net.IPv4(198, 18, 1, 1)) { // GUE from the box
		udp, _ := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
		if udp == nil || int(udp.Length) != len(frame)-34 || udp.Checksum != 0 || udp.DstPort != 6080 || frame[42]>>4 != 4 {
			t.Fatalf("GUE header %+v for an inner packet of %d bytes", udp, len(frame)-42)
		}
	}
}

// checkTransport6 decodes an IPv6 frame the fast path sent with gopacket
// and checks its payload length against the frame and, when the frame it
// came from had a valid one (the corpus has frames that do not, which
// the pipeline forwards as they are), its TCP or UDP checksum from
// scratch.
func checkTransport6(t *testing.T, frame []byte, valid bool) {
	t.Helper()
	pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	ip, _ := pkt.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	if ip == nil || (ip.NextHeader != layers.IPProtocolTCP && ip.NextHeader != layers.IPProtocolUDP) {
		t.Fatalf("gopacket finds no IPv6 TCP or UDP packet in % x", frame)
	}
	if int(ip.Length) != len(frame)-54 {
		t.Fatalf("IPv6 payload length %d, the frame carries %d", ip.Length, len(frame)-54)
	}
	if s := sum6(frame); valid && s != 0xffff {
		t.Fatalf("%v checksum does not verify (sum %#04x)", ip.NextHeader, s)
	}
}

// sum6 is the folded sum over the pseudo-header and the TCP or UDP
// segment of an untagged IPv6 frame without extension headers, cut at its
// payload length: 0xffff when the checksum verifies.
func sum6(frame []byte) uint16 {
	n := int(binary.BigEndian.Uint16(frame[18:]))
	l4 := frame[54 : 54+n]
	pseudo := append(append([]byte(nil), frame[22:54]...), 0, 0, byte(n>>8), byte(n), 0, 0, 0, frame[20])
	return fold(sum16(pseudo) + sum16(l4))
}

// checkOuter6 decodes an IPv6-in-IPv6 frame the fast path sent with
// gopacket: the outer header's payload length is the frame's, its next
// header 41, its traffic class the inner one's, and the inner packet is
// the frame's IPv6 packet, untouched.
func checkOuter6(t *testing.T, frame, in []byte) {
	t.Helper()
	pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	outer, _ := pkt.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	if outer == nil || outer.NextHeader != layers.IPProtocolIPv6 || int(outer.Length) != len(frame)-54 || outer.HopLimit != 64 {
		t.Fatalf("outer header %+v of a %d-byte frame", outer, len(frame))
	}
	n := 40 + int(binary.BigEndian.Uint16(in[18:]))
	if !bytes.Equal(frame[54:], in[14:14+n]) {
		t.Fatalf("inner packet\n% x\nwas\n% x", frame[54:], in[14:14+n])
	}
	if tc := uint8(binary.BigEndian.Uint32(in[14:]) >> 20); outer.TrafficClass != tc {
		t.Fatalf("outer traffic class %#x, inner %#x", outer.TrafficClass, tc)
	}
}
