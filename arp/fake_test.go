package arp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/bpf"

	"github.com/vipd/vipd/internal/linkwatch"
)

// fakeNet is an in-memory layer 2: frameConns opened on it see the frames
// the test delivers to their interface, and every frame written is recorded
// and offered to peer, whose answers are delivered back.
type fakeNet struct {
	mu      sync.Mutex
	conns   []*fakeConn
	sent    chan sentFrame
	peer    func(ifindex int, frame []byte) [][]byte
	listens int
	failOn  map[int]error // listen errors by ifindex
}

type sentFrame struct {
	ifindex int
	frame   []byte
}

func newFakeNet() *fakeNet { return &fakeNet{sent: make(chan sentFrame, 4096)} }

func (n *fakeNet) listen(ifindex int, etherType uint16, _ []bpf.RawInstruction) (frameConn, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.listens++
	if err := n.failOn[ifindex]; err != nil {
		return nil, err
	}
	c := &fakeConn{net: n, ifindex: ifindex, etherType: etherType, in: make(chan []byte, 256),
		closed: make(chan struct{}), mcast: map[[6]byte]int{}}
	n.conns = append(n.conns, c)
	return c, nil
}

// deliver hands frame to every open conn on ifindex bound to its EtherType.
func (n *fakeNet) deliver(ifindex int, frame []byte) {
	et := binary.BigEndian.Uint16(frame[12:14])
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range n.conns {
		if c.ifindex == ifindex && c.etherType == et && !c.isClosed() {
			c.in <- append([]byte(nil), frame...)
		}
	}
}

func (n *fakeNet) openConns() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	open := 0
	for _, c := range n.conns {
		if !c.isClosed() {
			open++
		}
	}
	return open
}

// next returns the next frame written, or fails the test after d.
func (n *fakeNet) next(t *testing.T, d time.Duration) sentFrame {
	t.Helper()
	select {
	case f := <-n.sent:
		return f
	case <-time.After(d):
		t.Fatalf("no frame sent within %v", d)
		return sentFrame{}
	}
}

// nextWhere returns the next frame written that keep accepts, dropping the
// others.
func (n *fakeNet) nextWhere(t *testing.T, d time.Duration, keep func([]byte) bool) []byte {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case f := <-n.sent:
			if keep(f.frame) {
				return f.frame
			}
		case <-deadline:
			t.Fatalf("no matching frame sent within %v", d)
			return nil
		}
	}
}

// none fails the test if a frame was written and not taken yet. Tests call
// it once whatever could have written one is known to be over.
func (n *fakeNet) none(t *testing.T) {
	t.Helper()
	select {
	case f := <-n.sent:
		t.Fatalf("unexpected frame sent on ifindex %d: % x", f.ifindex, f.frame)
	default:
	}
}

type fakeConn struct {
	net       *fakeNet
	ifindex   int
	etherType uint16
	in        chan []byte
	closeOnce sync.Once
	closed    chan struct{}

	mu    sync.Mutex
	mcast map[[6]byte]int
}

func (c *fakeConn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

func (c *fakeConn) ReadFrame(b []byte) (int, error) {
	select {
	case f := <-c.in:
		return copy(b, f), nil
	case <-c.closed:
		return 0, net.ErrClosed
	}
}

func (c *fakeConn) WriteFrame(b []byte) error {
	if c.isClosed() {
		return net.ErrClosed
	}
	f := append([]byte(nil), b...)
	c.net.sent <- sentFrame{c.ifindex, f}
	c.net.mu.Lock()
	peer := c.net.peer
	c.net.mu.Unlock()
	if peer != nil {
		for _, a := range peer(c.ifindex, f) {
			c.net.deliver(c.ifindex, a)
		}
	}
	return nil
}

func (c *fakeConn) JoinMulticast(mac [6]byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mcast[mac]++
	return nil
}

func (c *fakeConn) LeaveMulticast(mac [6]byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mcast[mac] == 0 {
		return errors.New("not a member")
	}
	if c.mcast[mac]--; c.mcast[mac] == 0 {
		delete(c.mcast, mac)
	}
	return nil
}

func (c *fakeConn) groups() map[[6]byte]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[[6]byte]int{}
	for k, v := range c.mcast {
		m[k] = v
	}
	return m
}

func (c *fakeConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return nil
}

// fakeKernel is a routing table, neighbor table and link list in memory.
// RouteTo does a longest-prefix match over the routes, lowest metric first
// among equals, as the FIB would for these simple tables.
type fakeKernel struct {
	mu        sync.Mutex
	links     []linkwatch.Link
	routes    []route // main table
	local     []netip.Addr
	neigh     []neighbor
	failNext  error // returned once by the next Links call
	closed    bool
	linkCalls int // Links calls: a Resolver makes one at the start of each round
}

func (k *fakeKernel) Links() ([]linkwatch.Link, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.linkCalls++
	if err := k.failNext; err != nil {
		k.failNext = nil
		return nil, err
	}
	out := make([]linkwatch.Link, len(k.links))
	for i, l := range k.links {
		l.Addrs = append([]netip.Prefix(nil), l.Addrs...)
		out[i] = l
	}
	return out, nil
}

// rounds returns how many resolution rounds have started: each one that
// started after another proves the other over.
func (k *fakeKernel) rounds() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.linkCalls
}

func (k *fakeKernel) RouteTo(dst netip.Addr) (route, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, a := range k.local {
		if a == dst {
			return route{Type: 2 /* RTN_LOCAL */, Ifindex: 1}, nil
		}
	}
	var best route
	found := false
	for _, r := range k.routes {
		if !r.Dst.Contains(dst) {
			continue
		}
		if !found || r.Dst.Bits() > best.Dst.Bits() || r.Dst.Bits() == best.Dst.Bits() && r.Priority < best.Priority {
			best, found = r, true
		}
	}
	if !found {
		return route{}, fmt.Errorf("route to %v: network is unreachable", dst)
	}
	return best, nil
}

func (k *fakeKernel) Routes() ([]route, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]route(nil), k.routes...), nil
}

func (k *fakeKernel) Neighbors() ([]neighbor, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]neighbor(nil), k.neigh...), nil
}

func (k *fakeKernel) setNeighbor(n neighbor) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for i := range k.neigh {
		if k.neigh[i].Ifindex == n.Ifindex && k.neigh[i].Addr == n.Addr {
			k.neigh[i] = n
			return
		}
	}
	k.neigh = append(k.neigh, n)
}

func (k *fakeKernel) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closed = true
	return nil
}

func mustMAC(s string) [6]byte {
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		panic(fmt.Sprintf("bad MAC %q", s))
	}
	return [6]byte(hw)
}

func netHW(m [6]byte) net.HardwareAddr { return net.HardwareAddr(m[:]) }
