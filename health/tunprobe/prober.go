//go:build linux

package tunprobe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Defaults for the zero values of Options.
const (
	DefaultTUN      = "vipdprobe0"
	DefaultMark     = 0x76706470 // "vpdp"
	DefaultTable    = 0x7670     // 30320
	DefaultPriority = 1000       // before the main table's rule (32766)
	// DefaultLinger is how long a closed probe connection's packets are
	// still sent through the tunnel: its FIN, the last ACK and their
	// retransmissions.
	DefaultLinger = 5 * time.Second
)

// Options configures New.
type Options struct {
	// TUN is the name of the TUN device; "" means DefaultTUN. It must not
	// exist.
	TUN string
	// Mark is the socket mark (SO_MARK) of probe sockets and the fwmark
	// of the routing rule; 0 means DefaultMark. It must not be a mark
	// anything else on the box uses.
	Mark uint32
	// Table is the routing table holding the default route into the TUN;
	// 0 means DefaultTable. vipd owns it: New replaces its default
	// routes.
	Table uint32
	// Priority is the routing rule's priority; 0 means DefaultPriority.
	Priority uint32
	// Source4 and Source6 are the probe sockets' local addresses, one per
	// family probed: addresses of the box that the backends route their
	// replies to directly (the egress interface's). A family without one
	// cannot be probed.
	Source4, Source6 netip.Addr
	// Egress is the interface the backends' replies arrive on; New checks
	// its reverse-path filter (see the package documentation). "" skips
	// the check.
	Egress string
	// Linger is DefaultLinger when 0.
	Linger time.Duration
	// Logger receives what New sets up and removes; nil discards it.
	Logger *slog.Logger
}

// Prober dials TCP connections to a VIP through the tunnel of one of its
// backends. Its methods may be called from any goroutine.
type Prober struct {
	opts Options
	tun  *os.File
	// raw4, raw6 send encapsulated packets (nil when the family has no
	// source). One field a line: checklocks matches annotations to
	// fields by line, and a line that declares two shifts the rest.
	raw4 *os.File
	raw6 *os.File
	// ns is the network namespace New ran in.
	ns    *netNS
	rules []rule

	mu sync.Mutex
	// +checklocks:mu
	conns map[key]*conn

	stats counters
	// done is closed when the reader stops (by teardown when it never
	// started).
	done    chan struct{}
	reading bool
	once    sync.Once
}

// conn is a registered probe connection.
type conn struct {
	path Path
	// until is when a closed connection's packets stop being forwarded
	// (the zero time while it is open), in Unix nanoseconds.
	until atomic.Int64
}

// New sets the prober up in the network namespace of the calling thread:
// the TUN device, for each family with a source a routing rule (fwmark
// Mark → table Table) and a default route in Table into the TUN, and raw
// sockets to send the encapsulated packets. A rule left by a process that
// died (same family, mark, table and priority) is removed first. Close
// undoes all of it.
func New(o Options) (*Prober, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	if o.Egress != "" {
		if err := checkRPFilter(o.Egress, o.Source4.IsValid()); err != nil {
			return nil, err
		}
	}
	p := &Prober{opts: o, conns: map[key]*conn{}, done: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			p.teardown()
		}
	}()
	if p.ns, err = threadNS(); err != nil {
		return nil, err
	}
	if p.tun, err = openTUN(o.TUN); err != nil {
		return nil, err
	}
	if o.Source4.IsValid() {
		if p.raw4, err = openRaw(unix.AF_INET); err != nil {
			return nil, err
		}
	}
	if o.Source6.IsValid() {
		if p.raw6, err = openRaw(unix.AF_INET6); err != nil {
			return nil, err
		}
	}
	if err := p.setupRoutes(); err != nil {
		return nil, err
	}
	p.reading = true
	go p.read()
	ok = true
	return p, nil
}

func (o Options) withDefaults() (Options, error) {
	if o.TUN == "" {
		o.TUN = DefaultTUN
	}
	if len(o.TUN) > unix.IFNAMSIZ-1 {
		return o, fmt.Errorf("tunprobe: TUN name %q is longer than %d bytes", o.TUN, unix.IFNAMSIZ-1)
	}
	if o.Mark == 0 {
		o.Mark = DefaultMark
	}
	if o.Table == 0 {
		o.Table = DefaultTable
	}
	if o.Table == unix.RT_TABLE_MAIN || o.Table == unix.RT_TABLE_LOCAL || o.Table == unix.RT_TABLE_DEFAULT {
		return o, fmt.Errorf("tunprobe: table %d is one of the kernel's own", o.Table)
	}
	if o.Priority == 0 {
		o.Priority = DefaultPriority
	}
	if o.Linger <= 0 {
		o.Linger = DefaultLinger
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if !o.Source4.IsValid() && !o.Source6.IsValid() {
		return o, errors.New("tunprobe: no probe source address (Source4, Source6)")
	}
	if o.Source4.IsValid() && !o.Source4.Is4() || o.Source6.IsValid() && (!o.Source6.Is6() || o.Source6.Is4In6()) {
		return o, fmt.Errorf("tunprobe: probe sources %v, %v are not of their families", o.Source4, o.Source6)
	}
	return o, nil
}

// ErrNoSource is returned by Dial for a VIP of a family the prober has no
// source address for.
var ErrNoSource = errors.New("tunprobe: no probe source address of the VIP's family")

// Dial connects to vip through path: a TCP connection from the prober's
// source of vip's family, whose packets the prober encapsulates to
// path.Backend. The backend answers the source directly. Closing the
// connection ends the forwarding of its packets Linger later.
func (p *Prober) Dial(ctx context.Context, vip netip.AddrPort, path Path) (net.Conn, error) {
	v6 := vip.Addr().Is6()
	src, raw := p.opts.Source4, p.raw4
	if v6 {
		src, raw = p.opts.Source6, p.raw6
	}
	if raw == nil {
		return nil, ErrNoSource
	}
	if !path.Source.IsValid() {
		path.Source = src
	}
	if path.Backend.Is6() != v6 || path.Source.Is6() != v6 || !path.Backend.IsValid() {
		return nil, fmt.Errorf("tunprobe: path %v from %v is not of the VIP's family (%v)", path.Backend, path.Source, vip)
	}
	select {
	case <-p.done:
		return nil, net.ErrClosed
	default:
	}
	var c *conn
	d := net.Dialer{Control: func(network, address string, rc syscall.RawConn) error {
		var err error
		cerr := rc.Control(func(fd uintptr) {
			c, err = p.prepare(int(fd), src, path)
		})
		if cerr != nil {
			return cerr
		}
		return err
	}}
	network := "tcp4"
	if v6 {
		network = "tcp6"
	}
	var nc net.Conn
	err := p.inNS(func() error {
		var err error
		nc, err = d.DialContext(ctx, network, vip.String())
		return err
	})
	if err != nil {
		if c != nil {
			p.release(c)
		}
		return nil, err
	}
	return &probeConn{Conn: nc, p: p, c: c}, nil
}

// prepare marks the socket fd, binds it to src and a port the kernel
// chooses, and registers that port for path, before the SYN leaves.
func (p *Prober) prepare(fd int, src netip.Addr, path Path) (*conn, error) {
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_MARK, int(p.opts.Mark)); err != nil {
		return nil, fmt.Errorf("tunprobe: SO_MARK: %w", err)
	}
	var sa unix.Sockaddr
	if src.Is4() {
		sa = &unix.SockaddrInet4{Addr: src.As4()}
	} else {
		sa = &unix.SockaddrInet6{Addr: src.As16()}
	}
	if err := unix.Bind(fd, sa); err != nil {
		return nil, fmt.Errorf("tunprobe: bind %v: %w", src, err)
	}
	got, err := unix.Getsockname(fd)
	if err != nil {
		return nil, fmt.Errorf("tunprobe: getsockname: %w", err)
	}
	var k key
	switch a := got.(type) {
	case *unix.SockaddrInet4:
		k = key{port: uint16(a.Port)}
	case *unix.SockaddrInet6:
		k = key{v6: true, port: uint16(a.Port)}
	}
	c := &conn{path: path}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now().UnixNano()
	for k, old := range p.conns {
		if u := old.until.Load(); u != 0 && u < now {
			delete(p.conns, k)
		}
	}
	// The kernel gave the port to this socket, so an entry still under it
	// is a closed connection's, lingering: the new one takes over.
	p.conns[k] = c
	return c, nil
}

// release ends c's forwarding after Linger.
func (p *Prober) release(c *conn) {
	c.until.Store(time.Now().Add(p.opts.Linger).UnixNano())
}

// lookup returns the path of the connection k, if it is registered and
// not expired.
func (p *Prober) lookup(k key, now int64) (Path, bool) {
	p.mu.Lock()
	c, ok := p.conns[k]
	p.mu.Unlock()
	if !ok {
		return Path{}, false
	}
	if u := c.until.Load(); u != 0 && u < now {
		return Path{}, false
	}
	return c.path, true
}

type probeConn struct {
	net.Conn
	p    *Prober
	c    *conn
	once sync.Once
}

func (c *probeConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.p.release(c.c) })
	return err
}

// Stats returns the prober's counters.
func (p *Prober) Stats() Stats { return p.stats.snapshot() }

// Close stops the prober and removes what New set up. Dials after it
// fail with net.ErrClosed.
func (p *Prober) Close() error {
	var err error
	p.once.Do(func() { err = p.teardown() })
	return err
}

// teardown removes the rules (in the namespace New ran in) and closes the
// TUN, which deletes it and its routes, and the sockets.
func (p *Prober) teardown() error {
	var errs []error
	if len(p.rules) > 0 && p.ns != nil {
		errs = append(errs, p.inNS(p.removeRules))
	}
	if p.tun != nil {
		errs = append(errs, p.tun.Close())
	}
	if p.reading {
		<-p.done
	} else {
		close(p.done)
	}
	for _, f := range []*os.File{p.raw4, p.raw6} {
		if f != nil {
			f.Close()
		}
	}
	if p.ns != nil {
		p.ns.f.Close()
	}
	return errors.Join(errs...)
}

// netNS is a network namespace: its file and identity.
type netNS struct {
	f        *os.File
	dev, ino uint64
}

// threadNS opens the calling thread's network namespace.
func threadNS() (*netNS, error) {
	f, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, fmt.Errorf("tunprobe: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("tunprobe: %w", err)
	}
	return &netNS{f: f, dev: st.Dev, ino: st.Ino}, nil
}

// inNS runs f on a thread in the prober's namespace. Sockets and rules
// belong to the namespace of the thread that creates them: vipd runs in
// one namespace, but a test creates the prober inside one of its own and
// dials from threads that are not. Which namespace a thread is in is
// checked per call: no thread, not even the process's first, is known to
// stay in one (a test's other goroutines switch theirs).
func (p *Prober) inNS(f func() error) error {
	runtime.LockOSThread()
	cur, err := threadNS()
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer cur.f.Close()
	if cur.dev == p.ns.dev && cur.ino == p.ns.ino {
		defer runtime.UnlockOSThread()
		return f()
	}
	if err := unix.Setns(int(p.ns.f.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("tunprobe: setns: %w", err)
	}
	ferr := f()
	if err := unix.Setns(int(cur.f.Fd()), unix.CLONE_NEWNET); err != nil {
		// A thread left in a foreign namespace must not run other
		// goroutines: staying locked, it ends with this goroutine.
		return errors.Join(ferr, fmt.Errorf("tunprobe: setns back: %w", err))
	}
	runtime.UnlockOSThread()
	return ferr
}
