package afxdp

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/asavie/xdp"
	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/vipd/vipd/dataplane"
	"github.com/vipd/vipd/internal/nstest"
	"golang.org/x/sys/unix"
)

var testOpts = Options{FrameSize: 4096, FrameCount: 256, RxRing: 64, TxRing: 64, FillRing: 64, CompletionRing: 64, Copy: true, TxBudget: 64}

// rig is two namespaces joined by a veth pair: "a" runs an AF_XDP socket
// behind asavie/xdp's redirect-everything program (the steering program
// has its own tests), "b" talks to it through a raw packet socket.
type rig struct {
	a, b   *nstest.NS
	an, bn string
	q      *Queue
	sock   *Socket
	raw    int // AF_PACKET socket in b
	bIndex int
	macA   net.HardwareAddr
	macB   net.HardwareAddr
}

func newRig(t *testing.T) *rig {
	nstest.RequireRoot(t)
	r := &rig{a: nstest.New(t, "xa"), b: nstest.New(t, "xb"), an: nstest.Name("xa"), bn: nstest.Name("xb")}
	nstest.Veth(t, r.a, r.an, r.b, r.bn)
	err := r.a.Do(func() error {
		ifi, err := net.InterfaceByName(r.an)
		if err != nil {
			return err
		}
		r.macA = ifi.HardwareAddr
		prog, err := xdp.NewProgram(1)
		if err != nil {
			return err
		}
		t.Cleanup(func() { prog.Detach(ifi.Index); prog.Close() })
		if err := prog.Attach(ifi.Index); err != nil {
			return err
		}
		s, err := Open(ifi.Index, 0, testOpts)
		if err != nil {
			return err
		}
		r.sock = s
		return prog.Register(0, s.FD())
	})
	if err != nil {
		t.Fatalf("AF_XDP setup in %s: %v", r.a.Name, err)
	}
	r.q = NewQueue(r.sock, nil, 64)
	t.Cleanup(func() { r.q.Close() })
	err = r.b.Do(func() error {
		ifi, err := net.InterfaceByName(r.bn)
		if err != nil {
			return err
		}
		r.bIndex, r.macB = ifi.Index, ifi.HardwareAddr
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		r.raw = fd
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index})
	})
	if err != nil {
		t.Fatalf("packet socket in %s: %v", r.b.Name, err)
	}
	t.Cleanup(func() { unix.Close(r.raw) })
	return r
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// frame is a UDP packet from b to a with a sequence number in its payload.
func (r *rig) frame(t *testing.T, seq int, size int) []byte {
	buf := gopacket.NewSerializeBuffer()
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.IP{198, 18, 0, 2}, DstIP: net.IP{198, 18, 0, 1}}
	udp := &layers.UDP{SrcPort: 1000, DstPort: 2000}
	udp.SetNetworkLayerForChecksum(ip)
	payload := make([]byte, size)
	binary.BigEndian.PutUint32(payload, uint32(seq))
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		&layers.Ethernet{SrcMAC: r.macB, DstMAC: r.macA, EthernetType: layers.EthernetTypeIPv4}, ip, udp, gopacket.Payload(payload)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// exchange receives batches until n test frames (from b) arrived or the
// deadline, handing each batch back before the next receive, as the Queue
// contract requires; handle sets each test frame's verdict, and frames that
// are not the test's (the kernel's own, e.g. IPv6 neighbor discovery) are
// dropped. It returns how many test frames arrived.
func (r *rig) exchange(t *testing.T, n int, handle func(d *dataplane.Desc, f []byte)) int {
	descs := make([]dataplane.Desc, 64)
	got := 0
	deadline := time.Now().Add(3 * time.Second)
	// At least one round, so that n = 0 reaps completions and hands back
	// late frames.
	for first := true; first || (got < n && time.Now().Before(deadline)); first = false {
		k, err := r.q.Receive(descs, 50*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		for i := range descs[:k] {
			d := &descs[i]
			f := d.Buf[d.Off : d.Off+d.Len]
			d.Verdict = dataplane.VerdictDrop
			if len(f) >= 46 && bytes.Equal(f[6:12], r.macB) {
				handle(d, f)
				got++
			}
		}
		if err := r.q.Transmit(descs[:k]); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

func TestReceiveAndTransmitBack(t *testing.T) {
	r := newRig(t)
	const n = 40
	sent := map[uint32][]byte{}
	for i := 0; i < n; i++ {
		f := r.frame(t, i, 100)
		sent[uint32(i)] = f
		if err := unix.Sendto(r.raw, f, 0, &unix.SockaddrLinklayer{Ifindex: r.bIndex}); err != nil {
			t.Fatal(err)
		}
	}
	got := r.exchange(t, n, func(d *dataplane.Desc, f []byte) {
		if d.Off < dataplane.Headroom {
			t.Fatalf("a frame has %d bytes of headroom, the pipeline needs %d", d.Off, dataplane.Headroom)
		}
		seq := binary.BigEndian.Uint32(f[14+20+8:])
		if !bytes.Equal(f, sent[seq]) {
			t.Fatalf("frame %d differs from what was sent", seq)
		}
		// Send every even frame back with the MACs swapped, drop the rest.
		if seq%2 == 0 {
			copy(f[0:6], r.macB)
			copy(f[6:12], r.macA)
			d.Verdict, d.Port = dataplane.VerdictTX, dataplane.PortIngress
		}
	})
	if got != n {
		t.Fatalf("received %d of %d frames", got, n)
	}
	back := map[uint32]bool{}
	buf := make([]byte, 2048)
	unix.SetsockoptTimeval(r.raw, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200000})
	deadline := time.Now().Add(3 * time.Second)
	for len(back) < n/2 && time.Now().Before(deadline) {
		k, _, err := unix.Recvfrom(r.raw, buf, 0)
		if err != nil {
			continue
		}
		f := buf[:k]
		if k < 46 || !bytes.Equal(f[0:6], r.macB) || !bytes.Equal(f[6:12], r.macA) {
			continue // our own outgoing frames, or IPv6 noise
		}
		back[binary.BigEndian.Uint32(f[14+20+8:])] = true
	}
	if len(back) != n/2 {
		t.Fatalf("%d of %d frames came back", len(back), n/2)
	}
	for seq := range back {
		if seq%2 != 0 {
			t.Errorf("dropped frame %d was transmitted", seq)
		}
	}
	// Every frame is accounted for: after completions, all frames are free
	// or on the fill ring again.
	time.Sleep(50 * time.Millisecond)
	r.exchange(t, 0, nil) // reap completions, hand back any late frame
	st := r.q.Stats()
	if st.RxFrames < n || st.TxFrames != n/2 || st.TxRingFull != 0 || st.NoFrame != 0 {
		t.Errorf("stats %+v", st)
	}
	inFill := r.sock.fill.cachedProd - *r.sock.fill.cons
	if total := len(r.sock.free) + int(inFill); total != testOpts.FrameCount {
		t.Errorf("frame accounting: %d free + %d in the fill ring, want %d frames", len(r.sock.free), inFill, testOpts.FrameCount)
	}
	if !st.TxBudget {
		t.Logf("XDP_MAX_TX_SKB_BUDGET not accepted by this kernel")
	}
}

// TestManyBatches pushes several times the ring sizes through the socket to
// prove frames are recycled (no leak stalls the fill ring).
func TestManyBatches(t *testing.T) {
	r := newRig(t)
	total := 0
	for round := 0; round < 20; round++ {
		for i := 0; i < 32; i++ {
			if err := unix.Sendto(r.raw, r.frame(t, round*32+i, 60), 0, &unix.SockaddrLinklayer{Ifindex: r.bIndex}); err != nil {
				t.Fatal(err)
			}
		}
		total += r.exchange(t, 32, func(d *dataplane.Desc, _ []byte) {
			d.Verdict, d.Port = dataplane.VerdictTX, dataplane.PortIngress
		})
	}
	if total != 20*32 {
		t.Errorf("received %d of %d frames across 20 rounds", total, 20*32)
	}
	if st := r.q.Stats(); st.RxFillRingEmpty != 0 || st.RxDropped != 0 {
		t.Errorf("kernel dropped frames: %+v", st)
	}
}
