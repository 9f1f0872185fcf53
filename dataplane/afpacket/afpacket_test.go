package afpacket

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/vipd/vipd/dataplane"
	"github.com/vipd/vipd/testing/drivertest"
	"github.com/vipd/vipd/testing/nstest"
	"golang.org/x/sys/unix"
)

var testOpts = Options{FrameSize: 2048, RxFrames: 128, TxFrames: 128}

type rig struct {
	a, b *nstest.NS
	an   string // a's end of the veth
	q    *Queue
	peer *drivertest.Peer // b's end
	macA net.HardwareAddr
}

func newRig(t *testing.T) *rig { return newRigWith(t, testOpts, 0) }

// newRigWith is newRig with the port opened with o and, with mtu not 0,
// both veths' MTU set to it.
func newRigWith(t *testing.T, o Options, mtu int) *rig {
	nstest.RequireRoot(t)
	r := &rig{a: nstest.New(t, "pa"), b: nstest.New(t, "pb")}
	an, bn := nstest.Name("pa"), nstest.Name("pb")
	r.an = an
	nstest.Veth(t, r.a, an, r.b, bn)
	if mtu != 0 {
		r.a.Must(t, "ip", "link", "set", an, "mtu", strconv.Itoa(mtu))
		r.b.Must(t, "ip", "link", "set", bn, "mtu", strconv.Itoa(mtu))
	}
	var port *Port
	err := r.a.Do(func() error {
		ifi, err := net.InterfaceByName(an)
		if err != nil {
			return err
		}
		r.macA = ifi.HardwareAddr
		port, err = OpenPort(ifi.Index, o)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	r.q = NewQueue(port, nil, 64)
	t.Cleanup(func() { r.q.Close() })
	r.peer = drivertest.OpenPeer(t, r.b, bn)
	return r
}

// frame is a test frame from b to a, VLAN-tagged unless vlan is 0.
func (r *rig) frame(t *testing.T, seq int, vlan uint16) []byte {
	return drivertest.Frame(t, r.peer.MAC, r.macA, seq, 64, vlan)
}

func testSeq(f []byte) (uint32, bool) { return drivertest.Seq(f) }

func (r *rig) noise(t *testing.T)          { r.peer.Noise(t) }
func (r *rig) send(t *testing.T, f []byte) { r.peer.Send(t, f) }

// exchange is drivertest.Exchange; the kernel's own frames (e.g. IPv6
// router solicitations) get VerdictKernel.
func (r *rig) exchange(t *testing.T, n int, handle func(d *dataplane.Desc, f []byte, seq uint32)) int {
	return drivertest.Exchange(t, r.q, 128, dataplane.VerdictKernel, n, handle)
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
		copy(f[0:6], r.peer.MAC)
		copy(f[6:12], r.macA)
		d.Verdict, d.Port = dataplane.VerdictTX, dataplane.PortIngress
	})
	if seen != n {
		t.Fatalf("received %d of %d test frames", seen, n)
	}
	back := map[uint32]bool{}
	buf := make([]byte, 2048)
	unix.SetsockoptTimeval(r.peer.FD, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200000})
	deadline := time.Now().Add(30 * time.Second)
	for len(back) < n && time.Now().Before(deadline) {
		k, from, err := unix.Recvfrom(r.peer.FD, buf, 0)
		if err != nil {
			continue
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		f := buf[:k]
		if seq, ok := testSeq(f); ok && bytes.Equal(f[0:6], r.peer.MAC) && bytes.Equal(f[6:12], r.macA) {
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

// TestMaxFrame sends frames one byte longer than MaxFrame allows, then of
// exactly MaxFrame bytes, untagged and VLAN-tagged (the kernel strips the
// tag, which MaxFrame does not count), over a veth whose MTU admits them
// all: the long ones are cut by the kernel, and dropped and counted by the
// driver; the others arrive whole.
func TestMaxFrame(t *testing.T) {
	o := testOpts
	r := newRigWith(t, o, 4000)
	long := MaxFrame(o.FrameSize)
	const hdrs = 14 + 20 + 8 // drivertest.Frame: Ethernet, IPv4, UDP
	want := map[uint32][]byte{}
	for i, vlan := range []uint16{0, 100} {
		tag := 0
		if vlan != 0 {
			tag = 4
		}
		over := drivertest.Frame(t, r.peer.MAC, r.macA, 10+i, long+1-hdrs, vlan)
		fits := drivertest.Frame(t, r.peer.MAC, r.macA, i, long-hdrs, vlan)
		if len(fits) != long+tag {
			t.Fatalf("test frame of %d bytes, want %d", len(fits), long+tag)
		}
		r.send(t, over)
		r.send(t, fits)
		want[uint32(i)] = fits
	}
	got := r.exchange(t, len(want), func(d *dataplane.Desc, f []byte, seq uint32) {
		if !bytes.Equal(f, want[seq]) {
			t.Errorf("received frame %d of %d bytes, want one of the two that fit", seq, len(f))
		}
	})
	if got != len(want) {
		t.Fatalf("received %d test frames, want %d", got, len(want))
	}
	if st := r.q.Stats(); st.Truncated != 2 {
		t.Errorf("truncated %d, want 2 (the frames of %d bytes)", st.Truncated, long+1)
	}
}

// TestLinkFlap: a link that goes down and comes back costs what was sent
// meanwhile at most, never the worker (drivertest.LinkFlap); the error
// the kernel then holds for the receive socket is read and counted.
func TestLinkFlap(t *testing.T) {
	r := newRig(t)
	drivertest.LinkFlap(t, r.q, r.a, r.an, r.macA, r.peer, 8)
	if st := r.q.Stats(); st.SocketErrors == 0 || st.TxErrors == 0 {
		t.Errorf("the link went down uncounted: %+v", st)
	}
}
