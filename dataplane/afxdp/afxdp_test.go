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

// receive collects frames from the queue until n arrived or the deadline.
func (r *rig) receive(t *testing.T, descs []dataplane.Desc, n int) int {
	got := 0
	deadline := time.Now().Add(3 * time.Second)
	for got < n && time.Now().Before(deadline) {
		k, err := r.q.Receive(descs[got:], 50*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		got += k
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
	descs := make([]dataplane.Desc, 64)
	if got := r.receive(t, descs, n); got != n {
		t.Fatalf("received %d of %d frames", got, n)
	}
	for i := 0; i < n; i++ {
		d := &descs[i]
		if d.Off < dataplane.Headroom {
			t.Fatalf("frame %d has %d bytes of headroom, the pipeline needs %d", i, d.Off, dataplane.Headroom)
		}
		f := d.Buf[d.Off : d.Off+d.Len]
		seq := binary.BigEndian.Uint32(f[14+20+8:])
		if !bytes.Equal(f, sent[seq]) {
			t.Fatalf("frame %d differs from what was sent", seq)
		}
		// Send every even frame back with the MACs swapped, drop the rest.
		if seq%2 == 0 {
			copy(f[0:6], r.macB)
			copy(f[6:12], r.macA)
			d.Verdict, d.Port = dataplane.VerdictTX, dataplane.PortIngress
		} else {
			d.Verdict = dataplane.VerdictDrop
		}
	}
	if err := r.q.Transmit(descs[:n]); err != nil {
		t.Fatal(err)
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
	r.q.Receive(descs, 0)
	st := r.q.Stats()
	if st.RxFrames != n || st.TxFrames != n/2 || st.TxRingFull != 0 || st.NoFrame != 0 {
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
	descs := make([]dataplane.Desc, 64)
	total := 0
	for round := 0; round < 20; round++ {
		for i := 0; i < 32; i++ {
			if err := unix.Sendto(r.raw, r.frame(t, round*32+i, 60), 0, &unix.SockaddrLinklayer{Ifindex: r.bIndex}); err != nil {
				t.Fatal(err)
			}
		}
		got := r.receive(t, descs, 32)
		total += got
		for i := 0; i < got; i++ {
			descs[i].Verdict, descs[i].Port = dataplane.VerdictTX, dataplane.PortIngress
		}
		if err := r.q.Transmit(descs[:got]); err != nil {
			t.Fatal(err)
		}
	}
	if total != 20*32 {
		t.Errorf("received %d of %d frames across 20 rounds", total, 20*32)
	}
	if st := r.q.Stats(); st.RxFillRingEmpty != 0 || st.RxDropped != 0 {
		t.Errorf("kernel dropped frames: %+v", st)
	}
}
