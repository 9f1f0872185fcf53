package quicflow

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/vipd/vipd/testing/nstest"
	"github.com/vipd/vipd/testing/testbed"
)

// ALPN is the application protocol of testbed/quicbackend.
const ALPN = "vipd-test"

const (
	// chunk is the size of a flow's rounds.
	chunk = 512
	// startPatience bounds the handshakes of Start.
	startPatience = 20 * time.Second
)

// Flows are QUIC connections streaming through a VIP, as testbed's
// Stream.Echo streams: a connection the wrong server reset ends at once.
// Settle, Finish, Len and Backends are its Streams'.
type Flows struct {
	*testbed.Streams
	ns    *nstest.NS
	flows []*flow // fixed at Start

	mu sync.Mutex // guards every flow's conn, sock and trs
}

type flow struct {
	i    int
	st   *testbed.Stream // its client address, backend, rounds
	conn *quic.Conn
	sock *swapConn
	trs  []*quic.Transport // every transport the connection used

	// path counts the paths the connection switched to (0: the first);
	// only the current path's socket records sentRot.
	path atomic.Int32
	// sentRot is 1 + the config rotation codepoint (the top 3 bits of
	// the first octet of a QUIC-LB connection ID) of the destination ID
	// of the last short-header packet sent on the current path; 0: none
	// yet.
	sentRot atomic.Int32
}

// tap records the rotation codepoint of p's destination connection ID if
// p is a short-header packet (first bit 0) sent on path. The ID starts
// right after the first octet; its own first octet carries the codepoint
// whatever the ID's length.
func (f *flow) tap(path int32, p []byte) {
	if len(p) > 1 && p[0]&0x80 == 0 && f.path.Load() == path {
		f.sentRot.Store(int32(p[1]>>5) + 1)
	}
}

// Start opens n connections from ns to vip, each on its own socket, and
// starts streaming; it returns once every connection has completed a
// round. They stop with Finish.
func Start(ns *nstest.NS, vip netip.AddrPort, n int) (*Flows, error) {
	fs := &Flows{Streams: testbed.NewStreams(n), ns: ns}
	for i := range n {
		fs.flows = append(fs.flows, &flow{i: i, st: fs.Stream(i)})
	}
	if err := fs.Streams.Start("QUIC", vip.String(), startPatience, func(i int) { fs.run(fs.flows[i], vip) }); err != nil {
		return nil, err
	}
	return fs, nil
}

func clientTLS() *tls.Config {
	return &tls.Config{InsecureSkipVerify: true, NextProtos: []string{ALPN}}
}

func quicConfig() *quic.Config {
	return &quic.Config{MaxIdleTimeout: time.Minute, HandshakeIdleTimeout: 10 * time.Second}
}

// run is flow f's life: connect, open a stream, then the rounds of
// Stream.Echo, the first of which reads the backend's name.
func (fs *Flows) run(f *flow, vip netip.AddrPort) {
	st := f.st
	pc, err := testbed.ListenPacket(fs.ns, "udp4", ":0")
	if err != nil {
		st.Fail(err)
		return
	}
	sock := &swapConn{tap: func(p []byte) { f.tap(0, p) }}
	sock.cur.Store(&pcBox{pc})
	tr := &quic.Transport{Conn: sock}
	ctx, cancel := context.WithTimeout(context.Background(), startPatience)
	conn, err := tr.Dial(ctx, net.UDPAddrFromAddrPort(vip), clientTLS(), quicConfig())
	cancel()
	if err != nil {
		tr.Close()
		st.Fail(err)
		return
	}
	fs.mu.Lock()
	f.conn, f.sock, f.trs = conn, sock, []*quic.Transport{tr}
	fs.mu.Unlock()
	st.SetLocal(pc.LocalAddr().String())
	defer func() {
		conn.CloseWithError(0, "done")
		fs.mu.Lock()
		trs := f.trs
		fs.mu.Unlock()
		for _, t := range trs {
			t.Close()
		}
	}()
	ctx, cancel = context.WithTimeout(context.Background(), startPatience)
	s, err := conn.OpenStreamSync(ctx)
	cancel()
	if err != nil {
		st.Fail(err)
		return
	}
	br := bufio.NewReader(s)
	st.Echo(s, br, rand.New(rand.NewPCG(uint64(f.i), 0x71c)), chunk, func() error {
		name, err := br.ReadString('\n')
		if err != nil {
			return fmt.Errorf("reading the backend's name: %w", err)
		}
		st.Answered(strings.TrimSpace(name))
		return nil
	})
}

// Migrate moves every live connection to a new socket of its own, as a
// client that changes networks does: a new path (quic-go's AddPath), a
// probe of it within timeout, then a switch. It returns the connections
// whose probe or switch failed: they stay on their old path (which still
// works here), but a real client that left its old network would have
// lost them, so they count as broken.
func (fs *Flows) Migrate(timeout time.Duration) (failed []string) {
	return fs.eachLive(func(f *flow) error { return fs.migrate(f, timeout) })
}

// eachLive runs do for every live connection at once and returns, for
// each that failed, the connection (its client address and backend, as
// they are after do) and why.
func (fs *Flows) eachLive(do func(f *flow) error) (failed []string) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, f := range fs.live() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := do(f); err != nil {
				p := f.st.Progress()
				who := fmt.Sprintf("%s (backend %s): %v", p.Local, p.Backend, err)
				mu.Lock()
				failed = append(failed, who)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return failed
}

func (fs *Flows) migrate(f *flow, timeout time.Duration) error {
	pc, err := testbed.ListenPacket(fs.ns, "udp4", ":0")
	if err != nil {
		return err
	}
	fs.mu.Lock()
	path := int32(len(f.trs)) // the first transport is path 0
	tr := &quic.Transport{Conn: &tapConn{pc, func(p []byte) { f.tap(path, p) }}}
	f.trs = append(f.trs, tr)
	fs.mu.Unlock()
	p, err := f.conn.AddPath(tr)
	if err != nil {
		return fmt.Errorf("add path: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := p.Probe(ctx); err != nil {
		return fmt.Errorf("probe of the new path from %s: %w", pc.LocalAddr(), err)
	}
	// Before the switch, so that no packet of the new path goes
	// unrecorded; the old path may still send a few, unrecorded.
	old := f.path.Swap(path)
	if err := p.Switch(); err != nil {
		f.path.Store(old)
		return fmt.Errorf("switch: %w", err)
	}
	f.st.SetLocal(pc.LocalAddr().String())
	return nil
}

// Rebind gives every live connection a new source port under its feet, as
// a NAT that lost its mapping does: its socket is replaced and the old one
// closed, and the connection goes on sending from the new one, unaware.
// There is no old path to fall back to.
func (fs *Flows) Rebind() error {
	for _, f := range fs.live() {
		pc, err := testbed.ListenPacket(fs.ns, "udp4", ":0")
		if err != nil {
			return err
		}
		old := f.sock.cur.Swap(&pcBox{pc})
		old.Close()
		f.st.SetLocal(pc.LocalAddr().String())
	}
	return nil
}

func (fs *Flows) live() []*flow {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var out []*flow
	for _, f := range fs.flows {
		if f.conn != nil && !f.st.Progress().Dead {
			out = append(out, f)
		}
	}
	return out
}

// Changed asks every live connection, on a new stream, which backend
// answers it now, within timeout, and returns those answered by another
// backend than at the start, or not at all. Per connection that must
// never happen: a QUIC connection's state lives on one server.
func (fs *Flows) Changed(timeout time.Duration) (changed []string) {
	return fs.eachLive(func(f *flow) error {
		name, err := ask(f.conn, timeout)
		who := f.st.Progress().Backend
		switch {
		case err != nil:
			return err
		case name != who:
			return fmt.Errorf("now answered by %s", name)
		}
		return nil
	})
}

// ask opens a stream on conn, sends an octet (a server learns of a stream
// by its first frame) and reads the name the server answers with.
func ask(conn *quic.Conn, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	s, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return "", fmt.Errorf("open stream: %w", err)
	}
	defer s.CancelRead(0)
	defer s.Close()
	s.SetDeadline(time.Now().Add(timeout))
	if _, err := s.Write([]byte{0}); err != nil {
		return "", fmt.Errorf("write: %w", err)
	}
	name, err := bufio.NewReader(s).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("reading the backend's name: %w", err)
	}
	return strings.TrimSpace(name), nil
}

// Rotations counts the live flows by the QUIC-LB config rotation
// codepoint of the destination connection ID they last sent with, -1 for
// none sent yet: which configuration's IDs the clients actually use.
func (fs *Flows) Rotations() map[int]int {
	out := map[int]int{}
	for _, f := range fs.live() {
		out[int(f.sentRot.Load())-1]++
	}
	return out
}

// tapConn is a net.PacketConn that shows every packet it sends to tap.
type tapConn struct {
	net.PacketConn
	tap func([]byte)
}

func (t *tapConn) WriteTo(p []byte, a net.Addr) (int, error) {
	t.tap(p)
	return t.PacketConn.WriteTo(p, a)
}

// pcBox holds a net.PacketConn in an atomic.Pointer (an interface value
// cannot be swapped atomically by itself).
type pcBox struct{ net.PacketConn }

// swapConn is a net.PacketConn whose socket can be replaced while quic-go
// reads from it: a read that fails because its socket was swapped out
// and closed goes on with the new one.
type swapConn struct {
	cur atomic.Pointer[pcBox]
	tap func([]byte) // sees every packet sent
}

func (s *swapConn) ReadFrom(p []byte) (int, net.Addr, error) {
	for {
		c := s.cur.Load()
		n, a, err := c.ReadFrom(p)
		if err != nil && s.cur.Load() != c {
			continue // swapped under us: read the new socket
		}
		return n, a, err
	}
}

func (s *swapConn) WriteTo(p []byte, a net.Addr) (int, error) {
	s.tap(p)
	return s.cur.Load().WriteTo(p, a)
}

func (s *swapConn) Close() error                       { return s.cur.Load().Close() }
func (s *swapConn) LocalAddr() net.Addr                { return s.cur.Load().LocalAddr() }
func (s *swapConn) SetDeadline(t time.Time) error      { return s.cur.Load().SetDeadline(t) }
func (s *swapConn) SetReadDeadline(t time.Time) error  { return s.cur.Load().SetReadDeadline(t) }
func (s *swapConn) SetWriteDeadline(t time.Time) error { return s.cur.Load().SetWriteDeadline(t) }
