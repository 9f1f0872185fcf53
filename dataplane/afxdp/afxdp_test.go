package afxdp

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asavie/xdp"
	"github.com/vipd/vipd/dataplane"
	"github.com/vipd/vipd/testing/drivertest"
	"github.com/vipd/vipd/testing/nstest"
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
	peer   *drivertest.Peer // b's end
	macA   net.HardwareAddr
}

func newRig(t *testing.T) *rig { return newRigWith(t, testOpts, false, 0) }

// newRigWith is newRig with the socket opened with o, with gro, GRO turned
// on on a's veth, and with mtu not 0, both veths' MTU set to it, before the
// XDP program is attached.
func newRigWith(t *testing.T, o Options, gro bool, mtu int) *rig {
	nstest.RequireRoot(t)
	r := &rig{a: nstest.New(t, "xa"), b: nstest.New(t, "xb"), an: nstest.Name("xa"), bn: nstest.Name("xb")}
	nstest.Veth(t, r.a, r.an, r.b, r.bn)
	if mtu != 0 {
		r.a.Must(t, "ip", "link", "set", r.an, "mtu", strconv.Itoa(mtu))
		r.b.Must(t, "ip", "link", "set", r.bn, "mtu", strconv.Itoa(mtu))
	}
	if gro {
		if _, err := exec.LookPath("ethtool"); err != nil {
			t.Skip("ethtool not installed")
		}
		r.a.Must(t, "ethtool", "-K", r.an, "gro", "on")
	}
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
		s, err := Open(ifi.Index, 0, o)
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
	r.peer = drivertest.OpenPeer(t, r.b, r.bn)
	return r
}

// frame is a test frame from b to a with a payload of size bytes.
func (r *rig) frame(t *testing.T, seq int, size int) []byte {
	return drivertest.Frame(t, r.peer.MAC, r.macA, seq, size, 0)
}

func testSeq(f []byte) (uint32, bool) { return drivertest.Seq(f) }

func (r *rig) noise(t *testing.T)          { r.peer.Noise(t) }
func (r *rig) send(t *testing.T, f []byte) { r.peer.Send(t, f) }

// exchange is drivertest.Exchange; frames that are not the test's (the
// kernel's own, e.g. IPv6 neighbor discovery) are dropped. With n = 0 it
// makes one round and handle may be nil: a test frame then is one too
// many, and is dropped and counted.
func (r *rig) exchange(t *testing.T, n int, handle func(d *dataplane.Desc, f []byte, seq uint32)) int {
	return drivertest.Exchange(t, r.q, 64, dataplane.VerdictDrop, n, handle)
}

// patience bounds the waits for frames and for the kernel's deferred
// work: they end as soon as what they wait for happens, and a busy machine
// may take that long.
const patience = 30 * time.Second

func TestReceiveAndTransmitBack(t *testing.T) {
	r := newRig(t)
	const n = 40
	sent := map[uint32][]byte{}
	for i := 0; i < n; i++ {
		f := r.frame(t, i, 100)
		sent[uint32(i)] = f
		r.send(t, f)
		if i == n/2 {
			r.noise(t)
		}
	}
	got := r.exchange(t, n, func(d *dataplane.Desc, f []byte, seq uint32) {
		if d.Off < dataplane.Headroom {
			t.Fatalf("a frame has %d bytes of headroom, the pipeline needs %d", d.Off, dataplane.Headroom)
		}
		if !bytes.Equal(f, sent[seq]) {
			t.Fatalf("frame %d differs from what was sent", seq)
		}
		// Send every even frame back with the MACs swapped, drop the rest.
		if seq%2 == 0 {
			copy(f[0:6], r.peer.MAC)
			copy(f[6:12], r.macA)
			d.Verdict, d.Port = dataplane.VerdictTX, dataplane.PortIngress
		}
	})
	if got != n {
		t.Fatalf("received %d of %d frames", got, n)
	}
	back := map[uint32]bool{}
	buf := make([]byte, 2048)
	unix.SetsockoptTimeval(r.peer.FD, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200000})
	deadline := time.Now().Add(patience)
	for len(back) < n/2 && time.Now().Before(deadline) {
		k, _, err := unix.Recvfrom(r.peer.FD, buf, 0)
		if err != nil {
			continue
		}
		f := buf[:k]
		seq, ok := testSeq(f)
		if !ok || !bytes.Equal(f[0:6], r.peer.MAC) || !bytes.Equal(f[6:12], r.macA) {
			continue // our own outgoing frames, or the kernels' frames
		}
		back[seq] = true
	}
	if len(back) != n/2 {
		t.Fatalf("%d of %d frames came back", len(back), n/2)
	}
	for seq := range back {
		if seq%2 != 0 {
			t.Errorf("dropped frame %d was transmitted", seq)
		}
	}
	r.noise(t) // for the reaping exchanges below
	// Every frame is accounted for: free, on the fill ring, received and
	// not yet taken (a late kernel frame), or transmitted and not yet
	// reaped. Only a frame the kernel holds between two rings is missing
	// from the sum, so reap until it balances; a leaked or doubly freed
	// frame never does.
	var acc accounting
	extra := 0
	deadline = time.Now().Add(patience)
	for {
		extra += r.exchange(t, 0, nil) // reap completions, hand back any late frame
		if acc = r.frames(); acc.total() == testOpts.FrameCount || time.Now().After(deadline) {
			break
		}
	}
	if acc.total() != testOpts.FrameCount {
		t.Errorf("frame accounting: %+v, want %d frames", acc, testOpts.FrameCount)
	}
	if extra != 0 {
		t.Errorf("%d test frames arrived after all %d had", extra, n)
	}
	st := r.q.Stats()
	if st.RxFrames < n || st.TxFrames != n/2 || st.TxRingFull != 0 || st.NoFrame != 0 {
		t.Errorf("stats %+v", st)
	}
	if !st.TxBudget {
		t.Logf("XDP_MAX_TX_SKB_BUDGET not accepted by this kernel")
	}
}

// accounting says where the socket's frames are.
type accounting struct {
	Free, Fill, Rx, Tx, Completion int
}

func (a accounting) total() int { return a.Free + a.Fill + a.Rx + a.Tx + a.Completion }

// frames counts the socket's frames by where they are, reading the
// kernel's side of each ring with the acquire loads the driver uses.
func (r *rig) frames() accounting {
	s := r.sock
	return accounting{
		Free:       len(s.free),
		Fill:       int(s.fill.cachedProd - atomic.LoadUint32(s.fill.cons)),
		Rx:         int(atomic.LoadUint32(s.rx.prod) - s.rx.cachedCons),
		Tx:         int(s.tx.cachedProd - atomic.LoadUint32(s.tx.cons)),
		Completion: int(atomic.LoadUint32(s.cq.prod) - s.cq.cachedCons),
	}
}

// TestManyBatches pushes several times the ring sizes through the socket to
// prove frames are recycled (no leak stalls the fill ring).
func TestManyBatches(t *testing.T) {
	r := newRig(t)
	total := 0
	for round := 0; round < 20; round++ {
		for i := 0; i < 32; i++ {
			r.send(t, r.frame(t, round*32+i, 60))
		}
		r.noise(t)
		total += r.exchange(t, 32, func(d *dataplane.Desc, _ []byte, _ uint32) {
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

// sockopt reads a SOL_SOCKET option of the rig's socket.
func (r *rig) sockopt(t *testing.T, opt int) int {
	t.Helper()
	v, err := unix.GetsockoptInt(r.sock.FD(), unix.SOL_SOCKET, opt)
	if err != nil {
		t.Fatalf("getsockopt %d: %v", opt, err)
	}
	return v
}

// bounce sends n test frames from b, has the queue send every one back and
// checks they all arrive at a; it fails the test otherwise.
func (r *rig) bounce(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		r.send(t, r.frame(t, i, 60))
	}
	got := r.exchange(t, n, func(d *dataplane.Desc, f []byte, _ uint32) {
		copy(f[0:6], r.peer.MAC)
		copy(f[6:12], r.macA)
		d.Verdict, d.Port = dataplane.VerdictTX, dataplane.PortIngress
	})
	if got != n {
		t.Fatalf("received %d of %d frames", got, n)
	}
	unix.SetsockoptTimeval(r.peer.FD, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200000})
	back := map[uint32]bool{}
	buf := make([]byte, 2048)
	for deadline := time.Now().Add(patience); len(back) < n && time.Now().Before(deadline); {
		k, _, err := unix.Recvfrom(r.peer.FD, buf, 0)
		if err != nil {
			continue
		}
		if seq, ok := testSeq(buf[:k]); ok && bytes.Equal(buf[0:6], r.peer.MAC) {
			back[seq] = true
		}
	}
	if len(back) != n {
		t.Fatalf("%d of %d frames came back", len(back), n)
	}
}

// TestBusyPoll opens the socket with busy polling: the kernel must hold
// the three options, Receive must busy poll (non-blocking recvfrom) and
// frames must still flow both ways.
func TestBusyPoll(t *testing.T) {
	t.Run("xdp", func(t *testing.T) { testBusyPoll(t, false) })
	t.Run("gro+xdp", func(t *testing.T) { testBusyPoll(t, true) })
}

func testBusyPoll(t *testing.T, gro bool) {
	o := testOpts
	o.BusyPollUsecs, o.BusyPollBudget = 50, 32
	r := newRigWith(t, o, gro, 0)
	if on, err := r.sock.BusyPoll(); !on {
		t.Fatalf("busy polling refused: %v", err)
	}
	for _, c := range []struct {
		name      string
		opt, want int
	}{
		{"SO_PREFER_BUSY_POLL", unix.SO_PREFER_BUSY_POLL, 1},
		{"SO_BUSY_POLL", unix.SO_BUSY_POLL, 50},
	} {
		if got := r.sockopt(t, c.opt); got != c.want {
			t.Errorf("%s = %d, want %d", c.name, got, c.want)
		}
	}
	// The kernel has no getsockopt for SO_BUSY_POLL_BUDGET (ENOPROTOOPT
	// up to 6.18 at least); read it if it ever does.
	if got, err := unix.GetsockoptInt(r.sock.FD(), unix.SOL_SOCKET, unix.SO_BUSY_POLL_BUDGET); err == nil && got != 32 {
		t.Errorf("SO_BUSY_POLL_BUDGET = %d, want 32", got)
	} else if err != nil && !errors.Is(err, unix.ENOPROTOOPT) {
		t.Errorf("getsockopt SO_BUSY_POLL_BUDGET: %v", err)
	}
	r.bounce(t, 40)
	// An empty ring: Receive busy polls. A Receive may first find a frame
	// the peer's kernel sent (neighbour discovery, an MLD report), and
	// return it without polling.
	for i := 0; i < 5 && r.q.Stats().Wakeups == 0; i++ {
		r.exchange(t, 0, nil)
	}
	st := r.q.Stats()
	if !st.BusyPoll || st.Wakeups == 0 {
		t.Errorf("the queue did not busy poll: %+v", st)
	}
	// The kernel records the NAPI to busy poll with the first frame
	// (SO_INCOMING_NAPI_ID); without one, busy polling is a no-op in the
	// kernel and only the queue's polling of its rx ring remains. On
	// 6.18 a veth's XDP receive queue reports none, GRO on or off.
	id, err := r.sock.NAPIID()
	if err != nil {
		t.Errorf("getsockopt SO_INCOMING_NAPI_ID: %v", err)
	}
	t.Logf("SO_INCOMING_NAPI_ID %d, %d non-blocking recvfrom calls", id, st.Wakeups)
}

// TestBusyPollRefused: options the kernel refuses (a budget above its
// 65535 limit) leave a socket that works without busy polling and says
// why.
func TestBusyPollRefused(t *testing.T) {
	o := testOpts
	o.BusyPollUsecs, o.BusyPollBudget = 50, 1<<20
	r := newRigWith(t, o, false, 0)
	on, err := r.sock.BusyPoll()
	if on || !errors.Is(err, unix.EINVAL) {
		t.Fatalf("BusyPoll() = %v, %v; want false and EINVAL", on, err)
	}
	if p, u := r.sockopt(t, unix.SO_PREFER_BUSY_POLL), r.sockopt(t, unix.SO_BUSY_POLL); p != 0 || u != 0 {
		t.Errorf("after the refusal SO_PREFER_BUSY_POLL = %d, SO_BUSY_POLL = %d; want both 0", p, u)
	}
	r.bounce(t, 20)
	if st := r.q.Stats(); st.BusyPoll {
		t.Errorf("queue says it busy polls: %+v", st)
	}
}

// TestMaxFrame sends a frame one byte longer than MaxFrame allows, then one
// of exactly MaxFrame bytes, over a veth whose MTU admits both: the first
// is dropped by the kernel and counted, the second arrives whole.
func TestMaxFrame(t *testing.T) {
	for _, size := range []int{2048, 4096} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			o := testOpts
			o.FrameSize = size
			r := newRigWith(t, o, false, 3400) // veth's XDP limit is ~3,500
			long := min(MaxFrame(size), 3400+14)
			const hdrs = 14 + 20 + 8 // drivertest.Frame: Ethernet, IPv4, UDP
			if long == MaxFrame(size) {
				over := r.frame(t, 2, long+1-hdrs)
				r.send(t, over)
			}
			fits := r.frame(t, 1, long-hdrs)
			if len(fits) != long {
				t.Fatalf("test frame of %d bytes, want %d", len(fits), long)
			}
			r.send(t, fits)
			got := r.exchange(t, 1, func(d *dataplane.Desc, f []byte, seq uint32) {
				if seq != 1 || !bytes.Equal(f, fits) {
					t.Errorf("received frame %d of %d bytes, want frame 1 of %d", seq, len(f), long)
				}
			})
			if got != 1 {
				t.Fatalf("received %d test frames, want 1", got)
			}
			if st := r.q.Stats(); long == MaxFrame(size) && st.RxDropped != 1 {
				t.Errorf("kernel rx_dropped %d, want 1 (the frame of %d bytes)", st.RxDropped, long+1)
			}
		})
	}
}

// TestLinkFlap: a link that goes down and comes back costs what was sent
// meanwhile at most, never the worker (drivertest.LinkFlap); the failed
// sendto calls are counted.
func TestLinkFlap(t *testing.T) {
	r := newRig(t)
	drivertest.LinkFlap(t, r.q, r.a, r.an, r.macA, r.peer, 8)
	if st := r.q.Stats(); st.KickErrors == 0 {
		t.Errorf("the link went down uncounted: %+v", st)
	}
}

// TestTwoArmedTooLong: a frame for the other port that would not fit a
// frame of that port's UMEM (received at MaxFrame, then grown by an
// encapsulation header) is dropped and counted, not pushed as a
// descriptor past its frame's end for the kernel to refuse; the frames
// that fit go out, and no frame of either UMEM goes missing.
func TestTwoArmedTooLong(t *testing.T) {
	o := testOpts
	o.FrameSize = 2048
	r := newRigWith(t, o, false, 1800)
	c := nstest.New(t, "xc")
	en, cn := nstest.Name("xe"), nstest.Name("xc")
	nstest.Veth(t, r.a, en, c, cn)
	r.a.Must(t, "ip", "link", "set", en, "mtu", "1900")
	c.Must(t, "ip", "link", "set", cn, "mtu", "1900")
	var eg *Socket
	err := r.a.Do(func() error {
		ifi, err := net.InterfaceByName(en)
		if err != nil {
			return err
		}
		eg, err = Open(ifi.Index, 0, o)
		return err
	})
	if err != nil {
		t.Fatalf("egress socket: %v", err)
	}
	// Two-armed over the rig's socket; the rig's cleanup closes r.q, now
	// this queue, and with it both sockets.
	r.q = NewQueue(r.sock, eg, 64)
	out := drivertest.OpenPeer(t, c, cn)

	const n = 10
	size := MaxFrame(o.FrameSize)
	for i := 0; i < n; i++ {
		r.send(t, r.frame(t, i, size-14-20-8))
	}
	got := r.exchange(t, n, func(d *dataplane.Desc, f []byte, seq uint32) {
		if d.Len != size {
			t.Fatalf("frame %d of %d bytes, want %d", seq, d.Len, size)
		}
		if seq%2 == 0 { // grown by 20 bytes in front, as IPIP does
			d.Off -= 20
			d.Len += 20
		}
		copy(d.Buf[d.Off:], out.MAC)
		d.Verdict, d.Port = dataplane.VerdictTX, dataplane.PortEgress
	})
	if got != n {
		t.Fatalf("received %d of %d frames", got, n)
	}
	unix.SetsockoptTimeval(out.FD, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 50000})
	arrived := map[uint32]int{}
	buf := make([]byte, 4096)
	for deadline := time.Now().Add(patience); len(arrived) < n/2 && time.Now().Before(deadline); {
		r.exchange(t, 0, nil) // reap completions
		for {
			k, _, err := unix.Recvfrom(out.FD, buf, 0)
			if err != nil {
				break
			}
			if seq, ok := testSeq(buf[:k]); ok {
				arrived[seq] = k
			}
		}
	}
	for seq, k := range arrived {
		if seq%2 == 0 || k != size {
			t.Errorf("frame %d (%d bytes) arrived; only the odd ones, of %d bytes, should", seq, k, size)
		}
	}
	if len(arrived) != n/2 {
		t.Errorf("%d of the %d frames that fit arrived", len(arrived), n/2)
	}
	st := r.q.Stats()
	if st.TooLong != n/2 || st.TxFrames != n/2 || st.TxInvalid != 0 {
		t.Errorf("too long %d, sent %d, invalid %d; want %d, %d, 0", st.TooLong, st.TxFrames, st.TxInvalid, n/2, n/2)
	}
	for name, s := range map[string]*Socket{"ingress": r.sock, "egress": eg} {
		var acc accounting
		for deadline := time.Now().Add(patience); time.Now().Before(deadline); {
			r.exchange(t, 0, nil)
			if acc = (&rig{sock: s}).frames(); acc.total() == o.FrameCount {
				break
			}
		}
		if acc.total() != o.FrameCount {
			t.Errorf("%s UMEM: %+v, want %d frames", name, acc, o.FrameCount)
		}
	}
}

// TestReopen: once a queue is closed its socket is gone, so that the same
// interface queue can be bound again in the same process, and no mapping
// of the old socket is left.
func TestReopen(t *testing.T) {
	r := newRig(t)
	var st unix.Stat_t
	if err := unix.Fstat(r.sock.FD(), &st); err != nil {
		t.Fatal(err)
	}
	if err := r.q.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	if name := fmt.Sprintf("socket:[%d]", st.Ino); strings.Contains(string(maps), name) {
		t.Errorf("%s is still mapped after Close", name)
	}
	err = r.a.Do(func() error {
		ifi, err := net.InterfaceByName(r.an)
		if err != nil {
			return err
		}
		// The kernel releases the old socket's buffer pool, and with it
		// the queue, in deferred work (xp_put_pool): bind fails with
		// EBUSY until then (asavie/xdp's error does not wrap it).
		s, err := Open(ifi.Index, 0, testOpts)
		for deadline := time.Now().Add(patience); err != nil && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
			s, err = Open(ifi.Index, 0, testOpts)
		}
		if err != nil {
			return err
		}
		r.sock = s
		r.q = NewQueue(s, nil, 64) // the rig's cleanup closes it
		return nil
	})
	if err != nil {
		t.Fatalf("the same queue, opened again: %v", err)
	}
}

// TestKickDrainsRing: one Transmit sends everything queued, however many
// sendto calls the kernel's per-call budget takes (32 frames in copy
// mode unless XDP_MAX_TX_SKB_BUDGET, Linux 6.17+, raises it; this socket
// leaves it at 32). A kick that gave up after four calls left all past
// 128 frames on the ring until the next Transmit: with batches over 128,
// a ring that fills under load.
func TestKickDrainsRing(t *testing.T) {
	o := Options{FrameSize: 2048, FrameCount: 512, RxRing: 64, TxRing: 256, FillRing: 64, CompletionRing: 256, Copy: true}
	r := newRigWith(t, o, false, 0)
	const n = 200
	for i := 0; i < n; i++ {
		buf, off, ok := r.q.Alloc(dataplane.PortIngress)
		if !ok {
			t.Fatalf("no free frame for frame %d", i)
		}
		f := drivertest.Frame(t, r.macA, r.peer.MAC, i, 60, 0)
		copy(buf[off:], f)
		r.q.Emit(buf, off, len(f), dataplane.PortIngress)
	}
	if err := r.q.Transmit(nil); err != nil {
		t.Fatal(err)
	}
	unix.SetsockoptTimeval(r.peer.FD, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100000})
	got := map[uint32]bool{}
	buf := make([]byte, 2048)
	for deadline := time.Now().Add(patience); len(got) < n && time.Now().Before(deadline); {
		k, _, err := unix.Recvfrom(r.peer.FD, buf, 0)
		if err != nil {
			continue
		}
		if seq, ok := testSeq(buf[:k]); ok && bytes.Equal(buf[6:12], r.macA) {
			got[seq] = true
		}
	}
	if len(got) != n {
		t.Errorf("one Transmit of %d frames: %d reached the peer (kicks %d)", n, len(got), r.q.Stats().Kicks)
	}
}
