package afpacket

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/vipd/vipd/dataplane"
	"github.com/vipd/vipd/internal/nstest"
	"golang.org/x/sys/unix"
)

var testOpts = Options{FrameSize: 2048, RxFrames: 128, TxFrames: 128}

type rig struct {
	a, b   *nstest.NS
	q      *Queue
	raw    int
	bIndex int
	macA   net.HardwareAddr
	macB   net.HardwareAddr
}

func newRig(t *testing.T) *rig {
	nstest.RequireRoot(t)
	r := &rig{a: nstest.New(t, "pa"), b: nstest.New(t, "pb")}
	an, bn := nstest.Name("pa"), nstest.Name("pb")
	nstest.Veth(t, r.a, an, r.b, bn)
	var port *Port
	err := r.a.Do(func() error {
		ifi, err := net.InterfaceByName(an)
		if err != nil {
			return err
		}
		r.macA = ifi.HardwareAddr
		port, err = OpenPort(ifi.Index, testOpts)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	r.q = NewQueue(port, nil, 64)
	t.Cleanup(func() { r.q.Close() })
	err = r.b.Do(func() error {
		ifi, err := net.InterfaceByName(bn)
		if err != nil {
			return err
		}
		r.bIndex, r.macB = ifi.Index, ifi.HardwareAddr
		if r.raw, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL))); err != nil {
			return err
		}
		return unix.Bind(r.raw, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(r.raw) })
	return r
}

// testMagic starts the payload of every test frame. Frames are recognised
// by it, never by their source MAC: b's kernel sends its own frames from
// that MAC too (IPv6 MLD reports and neighbor discovery on the fresh veth).
var testMagic = [8]byte{'v', 'i', 'p', 'd', 't', 'e', 's', 't'}

// frame is a UDP packet from b to a, VLAN-tagged unless vlan is 0, whose
// payload is testMagic and a sequence number.
func (r *rig) frame(t *testing.T, seq int, vlan uint16) []byte {
	buf := gopacket.NewSerializeBuffer()
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.IP{198, 18, 0, 2}, DstIP: net.IP{198, 18, 0, 1}}
	udp := &layers.UDP{SrcPort: 1000, DstPort: 2000}
	udp.SetNetworkLayerForChecksum(ip)
	payload := make([]byte, 64)
	copy(payload, testMagic[:])
	binary.BigEndian.PutUint32(payload[len(testMagic):], uint32(seq))
	ls := []gopacket.SerializableLayer{&layers.Ethernet{SrcMAC: r.macB, DstMAC: r.macA, EthernetType: layers.EthernetTypeIPv4}}
	if vlan != 0 {
		ls = []gopacket.SerializableLayer{&layers.Ethernet{SrcMAC: r.macB, DstMAC: r.macA, EthernetType: layers.EthernetTypeDot1Q},
			&layers.Dot1Q{VLANIdentifier: vlan, Type: layers.EthernetTypeIPv4}}
	}
	ls = append(ls, ip, udp, gopacket.Payload(payload))
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// testSeq returns the sequence number of a test frame (IPv4, possibly
// VLAN-tagged, UDP 1000 → 2000, payload starting with testMagic), and
// false for any other frame.
func testSeq(f []byte) (uint32, bool) {
	l3 := 14
	if len(f) >= 18 && binary.BigEndian.Uint16(f[12:]) == 0x8100 {
		l3 = 18
	}
	l4, pay := l3+20, l3+28
	if len(f) < pay+len(testMagic)+4 || binary.BigEndian.Uint16(f[l3-2:]) != 0x0800 || f[l3] != 0x45 ||
		f[l3+9] != 17 || binary.BigEndian.Uint16(f[l4:]) != 1000 || binary.BigEndian.Uint16(f[l4+2:]) != 2000 ||
		!bytes.Equal(f[pay:pay+len(testMagic)], testMagic[:]) {
		return 0, false
	}
	return binary.BigEndian.Uint32(f[pay+len(testMagic):]), true
}

// mldReport is an MLDv2 report as b's kernel sends it on a fresh veth
// (captured from a failing run), Ethernet source to be filled in.
const mldReport = "33330000001600000000000086dd600000000024000100000000000000000000000000000000ff0200000000000000000000000000163a000502000001008f0043a10000000104000000ff0200000000000000000001ff2b2bbe"

// noise sends a kernel-like frame from b's MAC that is not a test frame:
// the tests must tell the two apart by payload, whenever it arrives.
func (r *rig) noise(t *testing.T) {
	t.Helper()
	f, err := hex.DecodeString(mldReport)
	if err != nil {
		t.Fatal(err)
	}
	copy(f[6:12], r.macB)
	r.send(t, f)
}

func (r *rig) send(t *testing.T, f []byte) {
	t.Helper()
	if err := unix.Sendto(r.raw, f, 0, &unix.SockaddrLinklayer{Ifindex: r.bIndex}); err != nil {
		t.Fatal(err)
	}
}

// exchange receives batches until n test frames arrived or the deadline,
// handing each batch back before the next receive, as the Queue contract
// requires; handle sets each test frame's verdict, and the kernel's own
// frames (e.g. IPv6 router solicitations) get VerdictKernel.
func (r *rig) exchange(t *testing.T, n int, handle func(d *dataplane.Desc, f []byte, seq uint32)) int {
	descs := make([]dataplane.Desc, 128)
	got := 0
	deadline := time.Now().Add(3 * time.Second)
	for got < n && time.Now().Before(deadline) {
		k, err := r.q.Receive(descs, 50*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		for i := range descs[:k] {
			d := &descs[i]
			f := d.Buf[d.Off : d.Off+d.Len]
			d.Verdict = dataplane.VerdictKernel
			if seq, ok := testSeq(f); ok {
				handle(d, f, seq)
				got++
			}
		}
		if err := r.q.Transmit(descs[:k]); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

func TestReceiveAndTransmit(t *testing.T) {
	r := newRig(t)
	const n = 30
	sent := map[uint32][]byte{}
	for i := 0; i < n; i++ {
		vlan := uint16(0)
		if i%3 == 0 {
			vlan = 100 + uint16(i)
		}
		f := r.frame(t, i, vlan)
		sent[uint32(i)] = f
		r.send(t, f)
		if i == n/2 {
			r.noise(t)
		}
	}
	seen := r.exchange(t, n, func(d *dataplane.Desc, f []byte, seq uint32) {
		if d.Off < dataplane.Headroom {
			t.Fatalf("only %d bytes of headroom", d.Off)
		}
		if !bytes.Equal(f, sent[seq]) {
			t.Errorf("frame %d differs from what was sent (VLAN tag restored?)\n got % x\nwant % x", seq, f, sent[seq])
		}
		copy(f[0:6], r.macB)
		copy(f[6:12], r.macA)
		d.Verdict, d.Port = dataplane.VerdictTX, dataplane.PortIngress
	})
	if seen != n {
		t.Fatalf("received %d of %d test frames", seen, n)
	}
	back := map[uint32]bool{}
	buf := make([]byte, 2048)
	unix.SetsockoptTimeval(r.raw, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200000})
	deadline := time.Now().Add(3 * time.Second)
	for len(back) < n && time.Now().Before(deadline) {
		k, from, err := unix.Recvfrom(r.raw, buf, 0)
		if err != nil {
			continue
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		f := buf[:k]
		if seq, ok := testSeq(f); ok && bytes.Equal(f[0:6], r.macB) && bytes.Equal(f[6:12], r.macA) {
			back[seq] = true
		}
	}
	if len(back) != n {
		t.Errorf("%d of %d frames came back", len(back), n)
	}
	if st := r.q.Stats(); st.TxFrames < n || st.TxRingFull != 0 || st.Truncated != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestCheckHost(t *testing.T) {
	dir := t.TempDir()
	write := func(path, v string) {
		p := filepath.Join(dir, path)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(v+"\n"), 0o644)
	}
	vip4 := []netip.Addr{netip.MustParseAddr("198.18.0.100")}
	vip6 := []netip.Addr{netip.MustParseAddr("2001:2::100")}
	write("sys/net/ipv4/ip_forward", "0")
	write("sys/net/ipv6/conf/all/forwarding", "1")
	if err := CheckHost(dir, vip4); err != nil {
		t.Errorf("IPv4 VIPs with IPv4 forwarding off: %v", err)
	}
	if err := CheckHost(dir, vip6); !errors.Is(err, ErrHost) {
		t.Errorf("IPv6 forwarding on with an IPv6 VIP: %v", err)
	}
	write("sys/net/ipv4/ip_forward", "1")
	err := CheckHost(dir, vip4)
	if !errors.Is(err, ErrHost) || !bytes.Contains([]byte(err.Error()), []byte("sysctl -w net.ipv4.ip_forward=0")) {
		t.Errorf("forwarding on: %v", err)
	}
	if err := CheckHost(filepath.Join(dir, "missing"), vip4); err == nil {
		t.Errorf("unreadable sysctl accepted")
	}
	if err := CheckHost(dir, []netip.Addr{netip.MustParseAddr("127.0.0.1")}); err == nil || !bytes.Contains([]byte(err.Error()), []byte("local interface")) {
		t.Errorf("a local address as VIP: %v", err)
	}
}
