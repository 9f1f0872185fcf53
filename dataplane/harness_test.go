package dataplane

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/vipd/vipd/conntrack"
	"github.com/vipd/vipd/testing/csumref"
)

// The pipeline's tests build every input with gopacket and check every
// output with gopacket plus a reference checksum written here, so that
// neither the packet package's parser nor its checksum code vouches for
// itself.

var (
	macClient  = [6]byte{0x02, 0, 0, 0, 0, 0x01} // the client (or its router), on-link
	macIngress = [6]byte{0x02, 0, 0, 0, 0, 0x10}
	macEgress  = [6]byte{0x02, 0, 0, 0, 0, 0x11}
	macGateway = [6]byte{0x02, 0, 0, 0, 0, 0x20}

	client4 = netip.MustParseAddr("198.18.0.1")
	client6 = netip.MustParseAddr("2001:2::1")
	encap4  = netip.MustParseAddr("198.18.1.1")
	encap6  = netip.MustParseAddr("2001:2:1::1")
	own4In  = netip.MustParseAddr("198.18.0.254")

	vipNAT4 = netip.MustParseAddr("198.18.0.100")
	vipDSR4 = netip.MustParseAddr("198.18.0.101")
	vipUDP4 = netip.MustParseAddr("198.18.0.102")
	vipAll4 = netip.MustParseAddr("198.18.0.103") // every port, NAT, src_ip affinity
	vipNAT6 = netip.MustParseAddr("2001:2::100")
	vipDSR6 = netip.MustParseAddr("2001:2::101")
)

const (
	idNAT4 = iota + 1
	idDSR4
	idUDP4
	idAll4
	idNAT6
	idDSR6
)

func macOf(ref uint32) [6]byte { return [6]byte{0x02, 0, 0, 0, 1, byte(ref)} }

func backends(prefix string, first uint32, port uint16) []BackendSpec {
	var bs []BackendSpec
	for i := uint32(0); i < 3; i++ {
		ref := first + i
		bs = append(bs, BackendSpec{
			Ref: ref, Addr: netip.MustParseAddr(prefix + string(rune('1'+i))), Port: port,
			Weight: 1, State: BackendUp, MAC: macOf(ref),
		})
	}
	return bs
}

// testSpec is a two-armed box with one VIP of every kind.
func testSpec() *Spec {
	return &Spec{
		Seed:     12345,
		TwoArmed: true,
		Host: Host{
			MAC:            [2][6]byte{macIngress, macEgress},
			MTU:            [2]int{1500, 1500},
			Addr4:          [2]netip.Addr{own4In, encap4},
			ClientGateway4: macGateway,
			ClientGateway6: macGateway,
		},
		VIPs: []VIPSpec{
			{ID: idNAT4, Name: "nat4", Addr: vipNAT4, Port: 80, Proto: 6, Mode: ModeNAT, TableSize: 65537, Backends: backends("198.18.1.1", 1, 8080)},
			{ID: idDSR4, Name: "dsr4", Addr: vipDSR4, Port: 80, Proto: 6, Mode: ModeDSR, TableSize: 65537, EncapSrc: encap4, Backends: backends("198.18.1.2", 4, 0)},
			{ID: idUDP4, Name: "udp4", Addr: vipUDP4, Port: 7000, Proto: 17, Mode: ModeNAT, TableSize: 65537, Backends: backends("198.18.1.3", 7, 7001)},
			{ID: idAll4, Name: "all4", Addr: vipAll4, Port: 0, Proto: 6, Mode: ModeNAT, SrcHash: true, TableSize: 65537, Backends: backends("198.18.1.4", 10, 0)},
			{ID: idNAT6, Name: "nat6", Addr: vipNAT6, Port: 80, Proto: 6, Mode: ModeNAT, TableSize: 65537, Backends: backends("2001:2:1::1", 13, 8080)},
			{ID: idDSR6, Name: "dsr6", Addr: vipDSR6, Port: 80, Proto: 6, Mode: ModeDSR, TableSize: 65537, EncapSrc: encap6, Backends: backends("2001:2:1::2", 16, 0)},
		},
	}
}

// harness is one worker with its own conntrack table.
type harness struct {
	t    testing.TB
	w    *Worker
	snap *Snapshot
	now  int64
	emit *sliceEmitter
}

func newHarness(t testing.TB, spec *Spec) *harness {
	t.Helper()
	snap, err := NewSnapshot(spec)
	if err != nil {
		t.Fatalf("NewSnapshot: %v", err)
	}
	return newHarnessOf(t, snap, 1<<14)
}

// newHarnessOf is a harness over a snapshot that already exists, with a
// connection table of capacity flows: a fresh worker for a shared
// snapshot, when a test wants one per input.
func newHarnessOf(t testing.TB, snap *Snapshot, capacity int) *harness {
	t.Helper()
	ct, err := conntrack.New(conntrack.Config{Capacity: capacity, Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, w: NewWorker(ct.Shard(0), WorkerOptions{}), snap: snap, now: 1e9, emit: &sliceEmitter{}}
}

// setSpec publishes a new snapshot built from spec.
func (h *harness) setSpec(spec *Spec) {
	h.t.Helper()
	snap, err := NewSnapshot(spec)
	if err != nil {
		h.t.Fatalf("NewSnapshot: %v", err)
	}
	h.snap = snap
}

// run processes frames as one batch and returns their descriptors.
func (h *harness) run(frames ...[]byte) []*Desc {
	h.emit.frames = h.emit.frames[:0]
	h.w.Begin(h.snap, h.now, h.emit)
	batch := make([]Desc, len(frames))
	ds := make([]*Desc, len(frames))
	for i, f := range frames {
		batch[i] = *newDesc(f, PortIngress)
		ds[i] = &batch[i]
	}
	h.w.ProcessBatch(batch)
	h.w.End(len(frames))
	return ds
}

// runOn is run for one frame received on port p.
func (h *harness) runOn(p uint8, frame []byte) *Desc {
	h.emit.frames = h.emit.frames[:0]
	h.w.Begin(h.snap, h.now, h.emit)
	d := newDesc(frame, p)
	h.w.Process(d)
	h.w.End(1)
	return d
}

func newDesc(frame []byte, rx uint8) *Desc {
	buf := make([]byte, Headroom+len(frame)+16)
	copy(buf[Headroom:], frame)
	return &Desc{Buf: buf, Off: Headroom, Len: len(frame), RxPort: rx}
}

func (d *Desc) frame() []byte { return d.Buf[d.Off : d.Off+d.Len] }

// sliceEmitter is the in-memory Emitter: frames are plain slices.
type sliceEmitter struct {
	frames []emitted
	limit  int // Alloc fails after this many frames when > 0
	allocs int
}

type emitted struct {
	data []byte
	port uint8
}

func (e *sliceEmitter) Alloc(uint8) ([]byte, int, bool) {
	if e.limit > 0 && e.allocs >= e.limit {
		return nil, 0, false
	}
	e.allocs++
	return make([]byte, 4096), Headroom, true
}

func (e *sliceEmitter) Emit(buf []byte, off, n int, port uint8) {
	e.frames = append(e.frames, emitted{append([]byte(nil), buf[off:off+n]...), port})
}

// --- building packets with gopacket ---

type pk struct {
	src, dst     netip.Addr
	sport, dport uint16
	proto        layers.IPProtocol
	flags        string // TCP flags: any of "SAFRP"
	seq          uint32 // TCP sequence number; 0: 1000
	payload      []byte
	ttl          uint8
	tos          uint8 // IPv4 TOS (DSCP, ECN)
	noDF         bool
	vlan         uint16 // 0: untagged
	srcMAC       [6]byte
	udpNoCsum    bool
	id           uint16
	fragOff      uint16 // IPv4 fragment offset in bytes
	mf           bool
}

func (p pk) withDefaults() pk {
	if p.ttl == 0 {
		p.ttl = 64
	}
	if p.proto == 0 {
		p.proto = layers.IPProtocolTCP
	}
	if p.srcMAC == ([6]byte{}) {
		p.srcMAC = macClient
	}
	if p.id == 0 {
		p.id = 0x4242
	}
	return p
}

func serialize(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: true}, ls...); err != nil {
		t.Fatalf("serialize: %v", err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// build returns an Ethernet frame for p.
func build(t testing.TB, p pk) []byte {
	t.Helper()
	p = p.withDefaults()
	var ls []gopacket.SerializableLayer
	et := layers.EthernetTypeIPv4
	if p.src.Is6() {
		et = layers.EthernetTypeIPv6
	}
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr(p.srcMAC[:]), DstMAC: net.HardwareAddr(macIngress[:]), EthernetType: et}
	if p.vlan != 0 {
		eth.EthernetType = layers.EthernetTypeDot1Q
		ls = append(ls, eth, &layers.Dot1Q{VLANIdentifier: p.vlan, Type: et})
	} else {
		ls = append(ls, eth)
	}
	var nl gopacket.NetworkLayer
	if p.src.Is4() {
		ip := &layers.IPv4{Version: 4, TTL: p.ttl, TOS: p.tos, Id: p.id, Protocol: p.proto,
			SrcIP: net.IP(p.src.AsSlice()), DstIP: net.IP(p.dst.AsSlice()), FragOffset: p.fragOff / 8}
		if !p.noDF {
			ip.Flags = layers.IPv4DontFragment
		}
		if p.mf {
			ip.Flags |= layers.IPv4MoreFragments
		}
		nl = ip
		ls = append(ls, ip)
	} else {
		ip := &layers.IPv6{Version: 6, HopLimit: p.ttl, NextHeader: p.proto,
			SrcIP: net.IP(p.src.AsSlice()), DstIP: net.IP(p.dst.AsSlice())}
		nl = ip
		ls = append(ls, ip)
	}
	switch p.proto {
	case layers.IPProtocolTCP:
		tcp := &layers.TCP{SrcPort: layers.TCPPort(p.sport), DstPort: layers.TCPPort(p.dport), Seq: 1000, Ack: 2000, Window: 65535}
		if p.seq != 0 {
			tcp.Seq = p.seq
		}
		for _, c := range p.flags {
			switch c {
			case 'S':
				tcp.SYN = true
			case 'A':
				tcp.ACK = true
			case 'F':
				tcp.FIN = true
			case 'R':
				tcp.RST = true
			case 'P':
				tcp.PSH = true
			}
		}
		tcp.SetNetworkLayerForChecksum(nl)
		ls = append(ls, tcp)
	case layers.IPProtocolUDP:
		udp := &layers.UDP{SrcPort: layers.UDPPort(p.sport), DstPort: layers.UDPPort(p.dport)}
		udp.SetNetworkLayerForChecksum(nl)
		ls = append(ls, udp)
	}
	ls = append(ls, gopacket.Payload(p.payload))
	f := serialize(t, ls...)
	if p.udpNoCsum && p.src.Is4() {
		off := 14 + 20 + 6
		if p.vlan != 0 {
			off += 4
		}
		binary.BigEndian.PutUint16(f[off:], 0)
	}
	return f
}

// --- checking outputs ---

// refSum is the deliberately naive RFC 1071 sum (testing/csumref).
func refSum(b []byte, init uint32) uint32 { return csumref.Sum(b, init) }

func pseudo(nl gopacket.Layer, proto uint8, n int) uint32 {
	switch ip := nl.(type) {
	case *layers.IPv4:
		b := append(append([]byte{}, ip.SrcIP.To4()...), ip.DstIP.To4()...)
		b = append(b, 0, proto, byte(n>>8), byte(n))
		return refSum(b, 0)
	case *layers.IPv6:
		b := append(append([]byte{}, ip.SrcIP.To16()...), ip.DstIP.To16()...)
		b = append(b, byte(n>>24), byte(n>>16), byte(n>>8), byte(n), 0, 0, 0, proto)
		return refSum(b, 0)
	}
	return 0
}

// decode parses an emitted frame with gopacket and checks every checksum in
// it: each IPv4 header, and the transport checksum of the innermost packet
// (unless it is a fragment, whose checksum covers bytes not present).
func decode(t testing.TB, frame []byte) gopacket.Packet {
	t.Helper()
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	if el := p.ErrorLayer(); el != nil {
		t.Fatalf("gopacket cannot decode the output: %v\n%s", el.Error(), p.Dump())
	}
	var lastIP gopacket.Layer
	frag := false
	for _, l := range p.Layers() {
		switch x := l.(type) {
		case *layers.IPv4:
			if refSum(x.Contents, 0) != 0xffff {
				t.Errorf("IPv4 header checksum wrong: %#04x (%v -> %v)", x.Checksum, x.SrcIP, x.DstIP)
			}
			if int(x.Length) != len(x.Contents)+len(x.Payload) {
				t.Errorf("IPv4 total length %d, but %d bytes follow", x.Length, len(x.Contents)+len(x.Payload))
			}
			lastIP = x
			frag = x.Flags&layers.IPv4MoreFragments != 0 || x.FragOffset != 0
		case *layers.IPv6:
			if int(x.Length) != len(x.Payload) {
				t.Errorf("IPv6 payload length %d, but %d bytes follow", x.Length, len(x.Payload))
			}
			lastIP = x
		case *layers.TCP, *layers.UDP, *layers.ICMPv4, *layers.ICMPv6:
			if frag || lastIP == nil {
				continue
			}
			b := append(append([]byte{}, l.LayerContents()...), l.LayerPayload()...)
			var init uint32
			switch l.(type) {
			case *layers.TCP:
				init = pseudo(lastIP, 6, len(b))
			case *layers.UDP:
				if x := l.(*layers.UDP); x.Checksum == 0 {
					if _, v6 := lastIP.(*layers.IPv6); v6 {
						t.Errorf("UDP over IPv6 with zero checksum")
					}
					continue
				}
				init = pseudo(lastIP, 17, len(b))
			case *layers.ICMPv6:
				init = pseudo(lastIP, 58, len(b))
			}
			if s := refSum(b, init); s != 0xffff {
				t.Errorf("%v checksum wrong (sum %#04x)", l.LayerType(), s)
			}
		}
	}
	return p
}

func layerOf[T gopacket.Layer](t testing.TB, p gopacket.Packet, which int) T {
	t.Helper()
	n := 0
	for _, l := range p.Layers() {
		if x, ok := l.(T); ok {
			if n == which {
				return x
			}
			n++
		}
	}
	var zero T
	t.Fatalf("no layer %T #%d in\n%s", zero, which, p.Dump())
	return zero
}

func mac(m net.HardwareAddr) [6]byte { return [6]byte(m) }

func addrOf(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}
