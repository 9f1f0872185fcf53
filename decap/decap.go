//go:build linux

package decap

import (
	"context"
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
// addressed to this host, checks them and writes the inner packets to a
// TUN device, from which the kernel delivers them to its own sockets.
//
// Its sockets and TUN device belong to the network namespace of the OS
// thread that called New. Stats may be called from any goroutine; Run at
// most once; Close once Run has returned, or to make it return.
type Decap struct {
	opts   Options
	filter filter
	local  localSet
	stats  counters

	tun  *os.File
	raw4 *os.File
	raw6 *os.File    // nil without Options.IPv6
	nl   *addrReader // nil without Options.CheckLocal
	rd6  *reader6    // receive state of raw6, allocated once
	rc6  syscall.RawConn

	restore []sysctlChange // host-wide sysctls New changed

	closeOnce sync.Once
	closeErr  error
	closed    atomic.Bool // set by Close before it closes the files
}

// New creates the TUN device, sets it up and opens the raw sockets. It
// needs CAP_NET_ADMIN (TUN, sysctls) and CAP_NET_RAW (raw sockets). On
// error, everything it created is removed again.
func New(opts Options) (*Decap, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	d := &Decap{opts: o}
	d.filter = filter{allowed: slices.Clone(o.AllowedSources), checkLocal: o.CheckLocal, local: &d.local, stats: &d.stats}
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
	if o.CheckLocal {
		if d.nl, err = openAddrReader(); err != nil {
			return nil, err
		}
		if err := d.refreshLocal(); err != nil {
			return nil, err
		}
	}
	if d.raw4, err = openRaw(unix.AF_INET, unix.IPPROTO_IPIP, o.ReceiveBuffer); err != nil {
		return nil, err
	}
	if o.IPv6 {
		if d.raw6, err = openRaw(unix.AF_INET6, unix.IPPROTO_IPV6, o.ReceiveBuffer); err != nil {
			return nil, err
		}
		if d.rc6, err = d.raw6.SyscallConn(); err != nil {
			return nil, err
		}
		d.rd6 = newReader6()
	}
	ok = true
	return d, nil
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
// one goroutine per socket, plus one refreshing the local addresses with
// Options.CheckLocal, and returns after all of them have stopped.
func (d *Decap) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Reads block in the runtime poller; an expired deadline wakes them,
	// and each loop then sees ctx done. The deadline stays expired, so a
	// loop that had not reached its read yet stops at its first one.
	stop := context.AfterFunc(ctx, func() {
		d.raw4.SetReadDeadline(aLongTimeAgo)
		if d.raw6 != nil {
			d.raw6.SetReadDeadline(aLongTimeAgo)
		}
	})
	defer stop()

	var wg sync.WaitGroup
	errc := make(chan error, 2)
	wg.Go(func() { errc <- d.loop4(ctx) })
	if d.raw6 != nil {
		wg.Go(func() { errc <- d.loop6(ctx) })
	}
	if d.nl != nil {
		wg.Go(func() { d.refreshLoop(ctx) })
	}
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

func (d *Decap) loop4(ctx context.Context) error {
	buf := make([]byte, bufSize)
	for {
		if err := d.receive4(buf); err != nil {
			if retry, err := d.stopped(ctx, err); !retry {
				return err
			}
		}
	}
}

// receive4 handles one packet of the IPIP socket, waiting for it.
func (d *Decap) receive4(buf []byte) error {
	n, err := d.raw4.Read(buf)
	if err != nil {
		return err
	}
	d.stats.received.Add(1)
	d.deliver(d.filter.strip4(buf[:n]))
	return nil
}

func (d *Decap) loop6(ctx context.Context) error {
	for {
		if err := d.receive6(); err != nil {
			if retry, err := d.stopped(ctx, err); !retry {
				return err
			}
		}
	}
}

// receive6 handles one packet of the IPv6-in-IPv6 socket, waiting for it.
func (d *Decap) receive6() error {
	src, n, err := d.rd6.read(d.rc6)
	if err != nil {
		return err
	}
	d.stats.received.Add(1)
	d.deliver(d.filter.strip6(d.rd6.buf[:n], netip.AddrFrom16(src)))
	return nil
}

// deliver writes an accepted inner packet to the TUN device; nil is a
// packet the filter dropped (and counted).
func (d *Decap) deliver(inner []byte) {
	if inner == nil {
		return
	}
	if _, err := d.tun.Write(inner); err != nil {
		d.stats.dropped[DropWrite].Add(1)
		return
	}
	d.stats.decapsulated.Add(1)
	d.stats.bytes.Add(uint64(len(inner)))
}

func (d *Decap) refreshLoop(ctx context.Context) {
	t := time.NewTicker(d.opts.LocalRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := d.refreshLocal(); err != nil && ctx.Err() == nil {
				// The previous set stays in force.
				d.opts.Logger.Warn("local address refresh failed", "err", err)
			}
		}
	}
}

// Close removes the TUN device (closing its only queue deletes it), closes
// the sockets and restores the host-wide sysctls New changed. A Run in
// progress returns. Close is idempotent.
func (d *Decap) Close() error {
	d.closeOnce.Do(func() {
		d.closed.Store(true)
		var errs []error
		for _, f := range []*os.File{d.raw4, d.raw6, d.tun} {
			if f != nil {
				errs = append(errs, f.Close())
			}
		}
		if d.nl != nil {
			errs = append(errs, d.nl.Close())
		}
		errs = append(errs, restoreSysctls(d.restore))
		d.closeErr = errors.Join(errs...)
	})
	return d.closeErr
}

// reader6 receives from the IPv6 raw socket with recvfrom(2), for the
// source address that read(2) would not give. Its method value is made
// once, so that a receive does not allocate a closure.
type reader6 struct {
	buf   []byte
	sa    unix.RawSockaddrInet6
	salen uint32
	n     int
	errno unix.Errno
	fn    func(fd uintptr) bool
}

func newReader6() *reader6 {
	r := &reader6{buf: make([]byte, bufSize)}
	r.fn = r.recv
	return r
}

// recv is called by the poller with the socket; false means "not ready,
// wait and call again".
func (r *reader6) recv(fd uintptr) bool {
	r.salen = unix.SizeofSockaddrInet6
	n, _, e := unix.Syscall6(unix.SYS_RECVFROM, fd,
		uintptr(unsafe.Pointer(&r.buf[0])), uintptr(len(r.buf)), 0,
		uintptr(unsafe.Pointer(&r.sa)), uintptr(unsafe.Pointer(&r.salen)))
	if e == unix.EAGAIN {
		return false
	}
	r.n, r.errno = int(n), e
	return true
}

// read returns one payload's length in r.buf and its outer source address.
func (r *reader6) read(rc syscall.RawConn) (src [16]byte, n int, err error) {
	if err := rc.Read(r.fn); err != nil {
		return src, 0, err
	}
	if r.errno != 0 {
		return src, 0, fmt.Errorf("decap: recvfrom: %w", r.errno)
	}
	return r.sa.Addr, r.n, nil
}
