// Package framegen generates Ethernet frames for tests that compare two
// implementations of a rule over many inputs: the XDP steering program
// against the pipeline's Go statement of the same rule, and that statement
// against what the pipeline does. Frames are drawn, with a fixed seed, from
// the addresses and ports a test names (so that most of them hit the
// interesting cases: VIPs, NAT backends, the box itself), in every shape
// the rule tells apart — VLAN tags, IPv4 options and fragments, IPv6
// extension and Fragment headers, ICMP errors of every type quoting such
// packets — and then cut short and mutated. It also reads the seed corpora
// of Go fuzz targets, so every seed kept in testdata joins the corpus.
//
// Only tests import it. Nothing it builds is sent anywhere.
package framegen

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// Params name what the frames are made of.
type Params struct {
	// Addrs are the addresses of interest, both families: VIPs, backends,
	// the box's own, clients, routers, strangers. Frames take their
	// addresses (and those of the packets ICMP errors quote) from here,
	// with a few random and IPv4-mapped ones mixed in.
	Addrs []netip.Addr
	// Ports are the ports of interest; random ones are mixed in.
	Ports []uint16
	// N is how many frames to generate (besides the seed files).
	N int
	// Seed seeds the generator; a corpus is a pure function of Params.
	Seed uint64
}

// Generate returns p.N frames.
func Generate(p Params) ([][]byte, error) {
	g := &gen{p: p, r: rand.New(rand.NewPCG(p.Seed, 0x6672616d6567656e))}
	for _, a := range p.Addrs {
		if a.Is4() {
			g.v4 = append(g.v4, a)
		} else {
			g.v6 = append(g.v6, a)
		}
	}
	if len(g.v4) == 0 || len(g.v6) == 0 || len(p.Ports) == 0 {
		return nil, fmt.Errorf("framegen: need IPv4 and IPv6 addresses and ports")
	}
	out := make([][]byte, 0, p.N)
	for len(out) < p.N {
		f, err := g.frame()
		if err != nil {
			return nil, err
		}
		out = append(out, g.damage(f))
	}
	return out, nil
}

type gen struct {
	p      Params
	r      *rand.Rand
	v4, v6 []netip.Addr
}

func (g *gen) chance(pct int) bool { return g.r.IntN(100) < pct }

func (g *gen) addr(v6 bool) netip.Addr {
	switch n := g.r.IntN(100); {
	case n < 4 && v6:
		// IPv4-mapped: never valid on the wire, and must never alias an
		// IPv4 entry.
		return netip.AddrFrom16(g.addr(false).As16())
	case n < 8:
		var b [16]byte
		for i := range b {
			b[i] = byte(g.r.Uint32())
		}
		if !v6 {
			return netip.AddrFrom4([4]byte(b[:4]))
		}
		return netip.AddrFrom16(b)
	}
	if v6 {
		return g.v6[g.r.IntN(len(g.v6))]
	}
	return g.v4[g.r.IntN(len(g.v4))]
}

func (g *gen) port() uint16 {
	if g.chance(10) {
		return uint16(g.r.Uint32())
	}
	return g.p.Ports[g.r.IntN(len(g.p.Ports))]
}

// Protocol numbers, as gopacket wants them.
const (
	tcp    = layers.IPProtocolTCP
	udp    = layers.IPProtocolUDP
	icmp4  = layers.IPProtocolICMPv4
	icmp6  = layers.IPProtocolICMPv6
	gre    = layers.IPProtocolGRE
	frag6H = 44
	hbh6H  = 0
	dst6H  = 60
)

// ICMP types to draw from, errors and not, relayed or not.
var (
	icmp4Types = []uint8{0, 3, 3, 3, 4, 5, 8, 11, 11, 12, 13}
	icmp6Types = []uint8{0, 1, 1, 2, 2, 3, 4, 5, 127, 128, 129, 133, 134, 135, 136, 137, 138}
)

// packet is an IP packet in the making: what frame and quote build.
type packet struct {
	src, dst     netip.Addr
	proto        layers.IPProtocol
	sport, dport uint16
	icmpType     uint8
	quote        []byte // for ICMP errors
	payload      int
	options      bool // IPv4 options
	frag         int  // 0 none, 1 first (MF, offset 0), 2 later, 3 IPv6 atomic
	ext          int  // IPv6: 0 none, 1 hop-by-hop first, 2 destination options after a Fragment header
}

func (g *gen) packetOf(v6 bool, depth int) packet {
	p := packet{src: g.addr(v6), dst: g.addr(v6), sport: g.port(), dport: g.port(), payload: g.r.IntN(64)}
	switch n := g.r.IntN(100); {
	case n < 35:
		p.proto = tcp
	case n < 65:
		p.proto = udp
	case n < 93:
		p.proto = icmp4
		p.icmpType = icmp4Types[g.r.IntN(len(icmp4Types))]
		if v6 {
			p.proto = icmp6
			p.icmpType = icmp6Types[g.r.IntN(len(icmp6Types))]
		}
	default:
		p.proto = gre
	}
	if g.chance(5) {
		p.payload = 1200 + g.r.IntN(300)
	}
	if !v6 && g.chance(10) {
		p.options = true
	}
	if g.chance(15) {
		p.frag = 1 + g.r.IntN(2)
		if v6 && g.chance(30) {
			p.frag = 3
		}
	}
	if v6 && g.chance(8) {
		p.ext = 1 + g.r.IntN(2)
	}
	if (p.proto == icmp4 || p.proto == icmp6) && depth == 0 {
		// The packet an error quotes: often one the box could have sent
		// or forwarded, sometimes itself an ICMP message.
		q := g.packetOf(v6, depth+1)
		if g.chance(50) {
			q.src, q.dst = p.dst, g.addr(v6)
		}
		if g.chance(70) {
			q.frag = 0
		}
		b, err := g.ipPacket(q)
		if err == nil {
			if g.chance(60) {
				b = b[:min(len(b), g.quoteCut(v6, q))]
			}
			p.quote = b
		}
	}
	return p
}

// quoteCut returns how much of a quoted packet an error keeps: around the
// end of the transport header's first 8 bytes, where the rule's reads end.
func (g *gen) quoteCut(v6 bool, q packet) int {
	base := 20
	if q.options {
		base = 40
	}
	if v6 {
		base = 40
	}
	return base + g.r.IntN(24)
}

// frame builds an Ethernet frame around a packet.
func (g *gen) frame() ([]byte, error) {
	v6 := g.chance(45)
	ip, err := g.ipPacket(g.packetOf(v6, 0))
	if err != nil {
		return nil, err
	}
	et := uint16(0x0800)
	if v6 {
		et = 0x86dd
	}
	hdr := []byte{0x02, 0, 0, 0, 0, 0x10, 0x02, 0, 0, 0, 0, 0x01}
	if g.chance(10) {
		hdr = append(hdr, 0x81, 0x00, 0, 5)
		if g.chance(10) {
			hdr = append(hdr, 0x81, 0x00, 0, 6) // a second tag: not vipd's
		}
	}
	if g.chance(2) {
		et = 0x0806
	}
	hdr = binary.BigEndian.AppendUint16(hdr, et)
	return append(hdr, ip...), nil
}

// ipPacket serializes p with valid lengths and checksums, then inserts
// IPv6 extension headers and sets fragment fields as asked.
func (g *gen) ipPacket(p packet) ([]byte, error) {
	var nl gopacket.NetworkLayer
	var ls []gopacket.SerializableLayer
	if p.src.Is4() && p.dst.Is4() {
		ip := &layers.IPv4{Version: 4, TTL: uint8(1 + g.r.IntN(64)), Protocol: p.proto, Id: uint16(g.r.Uint32()),
			SrcIP: net.IP(p.src.AsSlice()), DstIP: net.IP(p.dst.AsSlice())}
		if p.options {
			ip.Options = []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}}
		}
		nl = ip
		ls = append(ls, ip)
	} else {
		ip := &layers.IPv6{Version: 6, HopLimit: uint8(1 + g.r.IntN(255)), NextHeader: p.proto,
			SrcIP: net.IP(p.src.AsSlice()), DstIP: net.IP(p.dst.AsSlice())}
		nl = ip
		ls = append(ls, ip)
	}
	switch p.proto {
	case tcp:
		t := &layers.TCP{SrcPort: layers.TCPPort(p.sport), DstPort: layers.TCPPort(p.dport), Seq: g.r.Uint32(), Window: 1000,
			SYN: g.chance(40), ACK: g.chance(60), FIN: g.chance(5), RST: g.chance(5), PSH: g.chance(20)}
		t.SetNetworkLayerForChecksum(nl)
		ls = append(ls, t)
	case udp:
		u := &layers.UDP{SrcPort: layers.UDPPort(p.sport), DstPort: layers.UDPPort(p.dport)}
		u.SetNetworkLayerForChecksum(nl)
		ls = append(ls, u)
	case icmp4:
		ls = append(ls, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(p.icmpType, uint8(g.r.IntN(2))*4), Id: 1, Seq: 2})
	case icmp6:
		ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(p.icmpType, 0)}
		ic.SetNetworkLayerForChecksum(nl)
		// gopacket's ICMPv6 is 4 bytes: type, code, checksum.
		ls = append(ls, ic, gopacket.Payload([]byte{0, 0, 5, 0}))
	}
	if p.quote != nil {
		ls = append(ls, gopacket.Payload(p.quote))
	} else {
		pl := make([]byte, p.payload)
		for i := range pl {
			pl[i] = byte(g.r.Uint32())
		}
		ls = append(ls, gopacket.Payload(pl))
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: true}, ls...); err != nil {
		return nil, fmt.Errorf("framegen: %w", err)
	}
	b := append([]byte(nil), buf.Bytes()...)
	if p.src.Is4() && p.dst.Is4() {
		setFrag4(b, p.frag, g.r.IntN(180)+1)
		return b, nil
	}
	return g.ext6(b, p), nil
}

// setFrag4 marks an IPv4 packet a first or later fragment and fixes its
// header checksum.
func setFrag4(b []byte, frag, off int) {
	switch frag {
	case 1:
		b[6] |= 0x20
	case 2:
		binary.BigEndian.PutUint16(b[6:], uint16(off)|0x2000*uint16(off&1))
	default:
		return
	}
	hl := int(b[0]&0x0f) * 4
	b[10], b[11] = 0, 0
	var s uint32
	for i := 0; i < hl; i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	binary.BigEndian.PutUint16(b[10:], ^uint16(s))
}

// ext6 inserts a Fragment header, a hop-by-hop header or both after the
// fixed IPv6 header of b.
func (g *gen) ext6(b []byte, p packet) []byte {
	if p.frag == 0 && p.ext == 0 {
		return b
	}
	nh := b[6]
	var ins []byte
	if p.ext == 1 {
		next := nh
		if p.frag != 0 {
			next = frag6H
		}
		ins = append(ins, next, 0, 1, 4, 0, 0, 0, 0) // PadN
		nh = hbh6H
	}
	if p.frag != 0 {
		inner := b[6]
		if p.ext == 2 {
			inner = dst6H
		}
		fo := uint16(0)
		switch p.frag {
		case 1:
			fo = 1 // M
		case 2:
			fo = uint16(g.r.IntN(180)+1)<<3 | uint16(g.r.IntN(2))
		}
		ins = append(ins, inner, 0, byte(fo>>8), byte(fo), 0, 0, 0x12, 0x34)
		if p.ext != 1 {
			nh = frag6H
		}
		if p.ext == 2 {
			ins = append(ins, b[6], 0, 1, 4, 0, 0, 0, 0)
		}
	}
	out := append(append(append([]byte(nil), b[:40]...), ins...), b[40:]...)
	out[6] = nh
	binary.BigEndian.PutUint16(out[4:], uint16(len(out)-40))
	return out
}

// damage sometimes cuts a frame short, changes a byte or a few, or pads
// it: the rule reads raw bytes and must agree on broken frames too.
func (g *gen) damage(f []byte) []byte {
	switch n := g.r.IntN(100); {
	case n < 12:
		return f[:g.r.IntN(len(f)+1)]
	case n < 30:
		for k := 1 + g.r.IntN(3); k > 0; k-- {
			i := g.r.IntN(len(f))
			f[i] ^= byte(1 + g.r.IntN(255))
		}
	case n < 34:
		f = append(f, make([]byte, g.r.IntN(40))...) // Ethernet padding
	}
	return f
}

// SeedFiles reads every Go fuzz corpus file under dirs (as `go test`
// writes them: a "go test fuzz v1" line, then one value per line) and
// returns each []byte value found. Files whose values are of other types
// contribute nothing.
func SeedFiles(dirs ...string) ([][]byte, error) {
	var out [][]byte
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			vs, err := parseCorpusFile(b)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			out = append(out, vs...)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func parseCorpusFile(b []byte) ([][]byte, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	if !sc.Scan() || sc.Text() != "go test fuzz v1" {
		return nil, fmt.Errorf("not a Go fuzz corpus file")
	}
	var out [][]byte
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "[]byte(") || !strings.HasSuffix(line, ")") {
			continue
		}
		s, err := strconv.Unquote(line[len("[]byte(") : len(line)-1])
		if err != nil {
			return nil, err
		}
		out = append(out, []byte(s))
	}
	return out, sc.Err()
}
