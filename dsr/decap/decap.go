//go:build linux

package decap

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// bufSize is the receive buffer per socket: the largest IPv4 packet (Total
// Length is 16 bits), or the largest IPv6 payload without jumbograms.
// Packets the kernel merged (GRO) stay within it: GRO stops at 64 KiB.
const bufSize = 1 << 16

// netlinkTimeout bounds one local address dump.
const netlinkTimeout = 2 * time.Second

// Decap receives IPIP (and, with Options.IPv6, IPv6-in-IPv6) packets
// addressed to this host, and GUE datagrams on Options.GUEPort, checks
// them and writes the inner packets to a TUN device, from which the
// kernel delivers them to its own sockets.
//
// Its sockets and TUN device belong to the network namespace of the OS
// thread that called New. Stats may be called from any goroutine; Run at
// most once; Close once Run has returned, or to make it return.
type Decap struct {
	opts   Options
	filter filter
	chain  chainer
	local  localSet
	stats  counters

	tun *os.File
	rx  []*receiver // one per socket, each read by its own goroutine in Run
	nl  *addrReader // nil without Options.CheckLocal
	aw  *addrWatch  // nil without Options.CheckLocal
	sd  *sockDiag   // nil without Options.Chain
	vip *vipSetup   // nil without Options.VIPs

	restore []sysctlChange // host-wide sysctls New changed
	pinned  []pinned       // the TUN's sysctls Run keeps as New set them

	closeOnce sync.Once
	closeErr  error
	closed    atomic.Bool // set by Close before it closes the files
}

// kind is what a receiver's socket returns, which decides how it is
// checked.
type kind uint8

const (
	kindIPIP4 kind = iota // raw, protocol 4: whole packets, outer IPv4 header first
	kindIPIP6             // raw IPv6, next header 41: the payload after the outer header
	kindGUE               // UDP on the GUE port, either family: the UDP payload
)

// receiver is one socket and its receive state, allocated once.
type receiver struct {
	kind kind
	f    *os.File
	rc   syscall.RawConn
	rd   *reader
	fw   *forwarder // GUE sockets only: sends chained packets on
}

// New creates the TUN device, sets it up and opens the sockets. It needs
// CAP_NET_ADMIN (TUN, sysctls, addresses) and CAP_NET_RAW (raw sockets).
// On error, everything it created or changed is undone again.
func New(opts Options) (*Decap, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	d := &Decap{opts: o}
	// The chain peers are both the sources of chained packets the
	// filter accepts and the addresses the chainer sends to.
	peers := slices.Clone(o.ChainPeers)
	d.filter = filter{allowed: slices.Clone(o.AllowedSources), chainPeers: peers,
		checkLocal: o.CheckLocal, local: &d.local, stats: &d.stats}
	d.chain = chainer{on: o.Chain, peers: peers, stats: &d.stats}
	ok := false
	defer func() {
		if !ok {
			d.Close()
		}
	}()
	// The TUN first, and its sysctls before it is up: nothing may reach
	// the kernel through it before they are right.
	if d.tun, err = openTUN(o.TUN); err != nil {
		return nil, permHint(err, "CAP_NET_ADMIN")
	}
	if err := d.setupSysctls(); err != nil {
		return nil, err
	}
	if err := setLinkUp(o.TUN); err != nil {
		return nil, err
	}
	// The VIPs before the local address set is read, so that CheckLocal
	// accepts them from the first packet.
	if len(o.VIPs) > 0 {
		if d.vip, err = setupVIPs(o.VIPs, o.Logger); err != nil {
			return nil, err
		}
		if err := d.setupARPSysctls(); err != nil {
			return nil, err
		}
	}
	if o.CheckLocal {
		if d.nl, err = openAddrReader(); err != nil {
			return nil, err
		}
		// Subscribed before the first read: a change in between is
		// not missed.
		if d.aw, err = openAddrWatch(); err != nil {
			return nil, err
		}
		if err := d.refreshLocal(); err != nil {
			return nil, err
		}
	}
	if o.Chain {
		if d.sd, err = openSockDiag(); err != nil {
			return nil, err
		}
		d.chain.lookup = d.sd
		d.chain.cache = newFlowCache(o.ChainCache, o.ChainCacheTTL)
	}
	if err := d.open(kindIPIP4, func() (*os.File, error) { return openRaw(unix.AF_INET, unix.IPPROTO_IPIP, o.ReceiveBuffer) }); err != nil {
		return nil, err
	}
	if o.IPv6 {
		if err := d.open(kindIPIP6, func() (*os.File, error) { return openRaw(unix.AF_INET6, unix.IPPROTO_IPV6, o.ReceiveBuffer) }); err != nil {
			return nil, err
		}
	}
	if o.GUEPort != 0 {
		families := []int{unix.AF_INET}
		if o.IPv6 {
			families = append(families, unix.AF_INET6)
		}
		for _, fam := range families {
			if o.GUESockets > 1 {
				// Any socket with SO_REUSEPORT of the same user may join
				// a group: a second vipd-decap would share the port
				// silently. A plain socket cannot, so one bound for a
				// moment tells whether the port is free.
				probe, err := openUDP(fam, o.GUEPort, 0, false)
				if err != nil {
					return nil, err
				}
				probe.Close()
			}
			for range o.GUESockets {
				if err := d.open(kindGUE, func() (*os.File, error) { return openUDP(fam, o.GUEPort, o.ReceiveBuffer, o.GUESockets > 1) }); err != nil {
					return nil, err
				}
				d.rx[len(d.rx)-1].fw = newForwarder(fam == unix.AF_INET6, o.GUEPort)
			}
		}
	}
	ok = true
	return d, nil
}

// open opens a socket with open and adds it to d.rx.
func (d *Decap) open(k kind, open func() (*os.File, error)) error {
	f, err := open()
	if err != nil {
		return err
	}
	rx := &receiver{kind: k, f: f, rd: newReader()}
	d.rx = append(d.rx, rx) // before anything can fail: Close closes it
	rx.rc, err = f.SyscallConn()
	return err
}

// TUN returns the name of the TUN device.
func (d *Decap) TUN() string { return d.opts.TUN }

// Stats returns a snapshot of the counters. The counters are read one by
// one, so while packets flow, Received may run ahead of Decapsulated plus
// the drops by the packets in flight.
func (d *Decap) Stats() Stats { return d.stats.snapshot() }

// permHint adds which capability is missing to a permission error.
func permHint(err error, capability string) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return fmt.Errorf("%w (run as root or with %s)", err, capability)
	}
	return err
}

// openRaw opens a raw socket of protocol proto, non-blocking so that the
// runtime poller waits for it and read deadlines work.
func openRaw(family, proto, rcvbuf int) (*os.File, error) {
	fd, err := unix.Socket(family, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return nil, permHint(fmt.Errorf("decap: raw socket (protocol %d): %w", proto, err), "CAP_NET_RAW")
	}
	// SO_RCVBUFFORCE passes net.core.rmem_max, which is small on most
	// hosts; it needs CAP_NET_ADMIN, without which SO_RCVBUF is capped.
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvbuf) != nil {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvbuf)
	}
	return os.NewFile(uintptr(fd), fmt.Sprintf("raw:%d", proto)), nil
}

// openUDP opens a UDP socket of family bound to port on every address,
// non-blocking, with SO_REUSEPORT when reuse is set. The IPv6 socket is
// IPv6-only, so that the IPv4 one can share the port and IPv4 sources are
// never seen as mapped addresses. rcvbuf 0 leaves the receive buffer as
// it is.
func openUDP(family int, port uint16, rcvbuf int, reuse bool) (*os.File, error) {
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return nil, fmt.Errorf("decap: GUE socket: %w", err)
	}
	var sa unix.Sockaddr = &unix.SockaddrInet4{Port: int(port)}
	if family == unix.AF_INET6 {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("decap: GUE socket: IPV6_V6ONLY: %w", err)
		}
		sa = &unix.SockaddrInet6{Port: int(port)}
	}
	if reuse {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("decap: GUE socket: SO_REUSEPORT: %w", err)
		}
	}
	if rcvbuf > 0 && unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvbuf) != nil {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvbuf)
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EADDRINUSE) {
			return nil, fmt.Errorf("decap: GUE port %d is in use (a kernel fou/gue port, another vipd-decap?): %w", port, err)
		}
		return nil, permHint(fmt.Errorf("decap: bind GUE port %d: %w", port, err), "CAP_NET_BIND_SERVICE")
	}
	name := "udp4"
	if family == unix.AF_INET6 {
		name = "udp6"
	}
	return os.NewFile(uintptr(fd), fmt.Sprintf("gue:%s:%d", name, port)), nil
}

// refreshLocal re-reads the host's addresses for CheckLocal.
func (d *Decap) refreshLocal() error {
	addrs, err := d.nl.addrs(netlinkTimeout)
	if err != nil {
		return err
	}
	d.local.store(addrs)
	return nil
}

// aLongTimeAgo is a deadline in the past: setting it makes blocked reads
// return at once.
var aLongTimeAgo = time.Unix(1, 0)

// Run receives and decapsulates until ctx is done, then returns nil; or
// until a socket fails (Close included), then returns that error. It runs
// one goroutine per socket; one that re-reads the local addresses (with
// Options.CheckLocal) when the kernel says they changed and every
// Options.LocalRefresh, and on those ticks turns the TUN's forwarding off
// again if someone turned it on; and, with CheckLocal, one that receives
// the kernel's address notifications. It returns after all of them have
// stopped.
func (d *Decap) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Reads block in the runtime poller; an expired deadline wakes them,
	// and each loop then sees ctx done. The deadline stays expired, so a
	// loop that had not reached its read yet stops at its first one.
	stop := context.AfterFunc(ctx, func() {
		for _, rx := range d.rx {
			rx.f.SetReadDeadline(aLongTimeAgo)
		}
		if d.aw != nil {
			d.aw.f.SetReadDeadline(aLongTimeAgo)
		}
	})
	defer stop()

	var wg sync.WaitGroup
	errc := make(chan error, len(d.rx))
	for _, rx := range d.rx {
		wg.Go(func() { errc <- d.loop(ctx, rx) })
	}
	// changed has room for one refresh request: more arriving while
	// one waits are served by that one.
	changed := make(chan struct{}, 1)
	if d.aw != nil {
		wg.Go(func() { d.watchLoop(ctx, changed) })
	}
	wg.Go(func() { d.refreshLoop(ctx, changed) })
	var first error
	go func() {
		wg.Wait()
		close(errc)
	}()
	for err := range errc {
		if err != nil && first == nil {
			first = err
			cancel() // one socket failed: stop the others
		}
	}
	return first
}

// stopped tells a receive loop what to do with a read error: nil when ctx
// is done (a clean stop), os.ErrClosed after Close (a raw-connection read
// reports the closing as the runtime's unexported "use of closed file"),
// err otherwise.
func (d *Decap) stopped(ctx context.Context, err error) (retry bool, _ error) {
	if ctx.Err() != nil {
		return false, nil
	}
	if d.closed.Load() {
		return false, os.ErrClosed
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true, nil // not ours: someone else set a deadline
	}
	return false, err
}

func (d *Decap) loop(ctx context.Context, rx *receiver) error {
	for {
		if err := d.receive(rx); err != nil {
			if retry, err := d.stopped(ctx, err); !retry {
				return err
			}
		}
	}
}

// receive handles one packet of rx's socket, waiting for it.
func (d *Decap) receive(rx *receiver) error {
	n, err := rx.rd.read(rx.rc)
	if err != nil {
		return err
	}
	d.stats.received.Add(1)
	pkt := rx.rd.buf[:n]
	switch rx.kind {
	case kindIPIP4:
		d.deliver(d.filter.strip4(pkt))
	case kindIPIP6:
		d.deliver(d.filter.strip6(pkt, rx.rd.source()))
	case kindGUE:
		d.stats.gue.Add(1)
		inner, h := d.filter.stripGUE(pkt, rx.rd.source())
		if inner != nil && h.present() {
			switch d.chain.decide(inner, h) {
			case chainOn:
				d.forward(rx, pkt, h.prev)
				return nil
			case dropTarget:
				return nil
			}
		}
		d.deliver(inner)
		return nil
	}
	return nil
}

// forward sends payload, a GUE datagram with a previous-owner hint as
// received, on to the previous owner prev, port GUEPort, with
// HintChained set, from rx's socket (so from port GUEPort).
func (d *Decap) forward(rx *receiver, payload []byte, prev netip.Addr) {
	setChained(payload)
	if err := rx.fw.send(rx.rc, payload, prev); err != nil {
		d.stats.dropped[DropChainSend].Add(1)
		return
	}
	d.stats.hints[HintChainedOut].Add(1)
}

// deliver writes an accepted inner packet to the TUN device; nil is a
// packet the filter dropped (and counted).
func (d *Decap) deliver(inner []byte) {
	if inner == nil {
		return
	}
	if d.chain.on {
		d.chain.observe(inner)
	}
	if _, err := d.tun.Write(inner); err != nil {
		d.stats.dropped[DropWrite].Add(1)
		return
	}
	d.stats.decapsulated.Add(1)
	d.stats.bytes.Add(uint64(len(inner)))
}

// refreshLoop re-reads the local addresses (with CheckLocal) when
// changed says they changed, and every LocalRefresh in case a
// notification was missed; on the ticks it also checks the TUN's
// pinned sysctls.
func (d *Decap) refreshLoop(ctx context.Context, changed <-chan struct{}) {
	t := time.NewTicker(d.opts.LocalRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-t.C:
			d.checkPinned()
		}
		if d.nl == nil {
			continue
		}
		if err := d.refreshLocal(); err != nil && ctx.Err() == nil {
			// The previous set stays in force.
			d.opts.Logger.Warn("local address refresh failed", "err", err)
		}
	}
}

// watchLoop asks refreshLoop for a refresh on every address
// notification, until ctx is done or the socket fails; a failed socket
// leaves the LocalRefresh ticks.
func (d *Decap) watchLoop(ctx context.Context, changed chan<- struct{}) {
	for {
		err := d.aw.wait()
		if ctx.Err() != nil || d.closed.Load() {
			return
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			continue // not ours: someone else set a deadline
		}
		if err != nil {
			d.opts.Logger.Warn("address notifications failed, the local addresses are re-read every LocalRefresh only", "err", err)
			return
		}
		select {
		case changed <- struct{}{}:
		default:
		}
	}
}

// Close removes the TUN device (closing its only queue deletes it), closes
// the sockets, removes the VIPs New added and restores the host-wide
// sysctls New changed. A Run in progress returns. Close is idempotent.
func (d *Decap) Close() error {
	d.closeOnce.Do(func() {
		d.closed.Store(true)
		var errs []error
		for _, rx := range d.rx {
			errs = append(errs, rx.f.Close())
		}
		if d.tun != nil {
			errs = append(errs, d.tun.Close())
		}
		d.closePinned()
		if d.nl != nil {
			errs = append(errs, d.nl.Close())
		}
		if d.aw != nil {
			errs = append(errs, d.aw.Close())
		}
		if d.sd != nil {
			errs = append(errs, d.sd.Close())
		}
		if d.vip != nil {
			errs = append(errs, d.vip.undo())
		}
		errs = append(errs, restoreSysctls(d.restore))
		d.closeErr = errors.Join(errs...)
	})
	return d.closeErr
}

// reader receives from a socket with recvfrom(2), for the source address
// that read(2) would not give. Its method value is made once, so that a
// receive does not allocate a closure.
type reader struct {
	buf   []byte
	sa    unix.RawSockaddrAny
	salen uint32
	n     int
	errno unix.Errno
	fn    func(fd uintptr) bool
}

func newReader() *reader {
	r := &reader{buf: make([]byte, bufSize)}
	r.fn = r.recv
	return r
}

// recv is called by the poller with the socket; false means "not ready,
// wait and call again".
func (r *reader) recv(fd uintptr) bool {
	r.salen = unix.SizeofSockaddrAny
	n, _, e := unix.Syscall6(unix.SYS_RECVFROM, fd,
		uintptr(unsafe.Pointer(&r.buf[0])), uintptr(len(r.buf)), 0,
		uintptr(unsafe.Pointer(&r.sa)), uintptr(unsafe.Pointer(&r.salen)))
	if e == unix.EAGAIN {
		return false
	}
	r.n, r.errno = int(n), e
	return true
}

// read returns the length of one packet in r.buf.
func (r *reader) read(rc syscall.RawConn) (n int, err error) {
	if err := rc.Read(r.fn); err != nil {
		return 0, err
	}
	if r.errno != 0 {
		return 0, fmt.Errorf("decap: recvfrom: %w", r.errno)
	}
	return r.n, nil
}

// source returns the source address of the packet last read; the zero
// Addr for a family other than IPv4 and IPv6, which these sockets never
// report.
func (r *reader) source() netip.Addr {
	switch r.sa.Addr.Family {
	case unix.AF_INET:
		return netip.AddrFrom4((*unix.RawSockaddrInet4)(unsafe.Pointer(&r.sa)).Addr)
	case unix.AF_INET6:
		return netip.AddrFrom16((*unix.RawSockaddrInet6)(unsafe.Pointer(&r.sa)).Addr)
	}
	return netip.Addr{}
}

// forwarder sends datagrams from a GUE socket with sendto(2), without
// allocating: its method value and socket address are made once, and
// one receive goroutine uses it.
type forwarder struct {
	v6    bool
	port  uint16
	sa4   unix.RawSockaddrInet4
	sa6   unix.RawSockaddrInet6
	buf   []byte
	errno unix.Errno
	fn    func(fd uintptr) bool
}

func newForwarder(v6 bool, port uint16) *forwarder {
	w := &forwarder{v6: v6, port: port}
	w.sa4.Family = unix.AF_INET
	w.sa6.Family = unix.AF_INET6
	// The port in network byte order, as the kernel reads it.
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&w.sa4.Port))[:], port)
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&w.sa6.Port))[:], port)
	w.fn = w.sendto
	return w
}

// send sends b to to:port. to must be of the socket's family.
func (w *forwarder) send(rc syscall.RawConn, b []byte, to netip.Addr) error {
	if to.Is6() != w.v6 || len(b) == 0 {
		return errors.New("decap: chain target of the wrong family")
	}
	if w.v6 {
		w.sa6.Addr = to.As16()
	} else {
		w.sa4.Addr = to.As4()
	}
	w.buf = b
	err := rc.Write(w.fn)
	w.buf = nil
	if err != nil {
		return err
	}
	if w.errno != 0 {
		return w.errno
	}
	return nil
}

// sendto is called by the poller with the socket; false means "not
// writable, wait and call again".
func (w *forwarder) sendto(fd uintptr) bool {
	sa, salen := unsafe.Pointer(&w.sa4), uintptr(unix.SizeofSockaddrInet4)
	if w.v6 {
		sa, salen = unsafe.Pointer(&w.sa6), uintptr(unix.SizeofSockaddrInet6)
	}
	_, _, e := unix.Syscall6(unix.SYS_SENDTO, fd, uintptr(unsafe.Pointer(&w.buf[0])), uintptr(len(w.buf)), 0, uintptr(sa), salen)
	if e == unix.EAGAIN {
		return false
	}
	w.errno = e
	return true
}
