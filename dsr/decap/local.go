//go:build linux

package decap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// addrReader lists the addresses of one network namespace through a
// NETLINK_ROUTE socket kept open for the Decap's lifetime.
//
// net.InterfaceAddrs would do, except that it opens a new socket on every
// call, in the namespace of whichever OS thread runs it. A Decap created
// on a thread switched into another namespace (setns) must keep reading
// that namespace's addresses, as its other sockets keep receiving there.
type addrReader struct {
	f   *os.File
	buf []byte
	seq uint32
}

// netlinkBuf is the read buffer for address dumps. The kernel sizes dump
// messages after the reader's buffer, at least one page; 64 KiB holds any.
const netlinkBuf = 64 << 10

func openAddrReader() (*addrReader, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("decap: netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("decap: netlink bind: %w", err)
	}
	return &addrReader{f: os.NewFile(uintptr(fd), "netlink-route"), buf: make([]byte, netlinkBuf)}, nil
}

func (r *addrReader) Close() error { return r.f.Close() }

// errDumpInterrupted is returned when the address list changed during the
// dump (NLM_F_DUMP_INTR); the next refresh tries again.
var errDumpInterrupted = errors.New("decap: address dump interrupted by a change")

// addrs returns every address of every interface (IPv4 and IPv6), giving
// up after timeout.
func (r *addrReader) addrs(timeout time.Duration) ([]netip.Addr, error) {
	r.seq++
	// nlmsghdr (16 bytes) + ifaddrmsg (8 bytes, family AF_UNSPEC: all).
	var req [unix.NLMSG_HDRLEN + unix.SizeofIfAddrmsg]byte
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], unix.RTM_GETADDR)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:], r.seq)
	if _, err := r.f.Write(req[:]); err != nil {
		return nil, fmt.Errorf("decap: netlink request: %w", err)
	}
	if err := r.f.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return nil, err
	}
	var out []netip.Addr
	interrupted := false
	for {
		n, err := r.f.Read(r.buf)
		if err != nil {
			return nil, fmt.Errorf("decap: netlink read: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(r.buf[:n])
		if err != nil {
			return nil, fmt.Errorf("decap: netlink parse: %w", err)
		}
		for i := range msgs {
			m := &msgs[i]
			if m.Header.Seq != r.seq {
				continue // the tail of an earlier dump that timed out
			}
			if m.Header.Flags&unix.NLM_F_DUMP_INTR != 0 {
				interrupted = true
			}
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				if interrupted {
					return nil, errDumpInterrupted
				}
				return out, nil
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if e := int32(binary.NativeEndian.Uint32(m.Data)); e != 0 {
						return nil, fmt.Errorf("decap: netlink: %w", unix.Errno(-e))
					}
				}
				return nil, errors.New("decap: netlink: error message")
			case unix.RTM_NEWADDR:
				if a, ok := parseAddr(m); ok {
					out = append(out, a)
				}
			}
		}
	}
}

// parseAddr returns the local address of an RTM_NEWADDR message:
// IFA_LOCAL when present (on point-to-point links IFA_ADDRESS is the
// peer's), IFA_ADDRESS otherwise (IPv6 sends only that).
func parseAddr(m *syscall.NetlinkMessage) (netip.Addr, bool) {
	attrs, err := syscall.ParseNetlinkRouteAttr(m)
	if err != nil {
		return netip.Addr{}, false
	}
	var local, address []byte
	for _, a := range attrs {
		switch a.Attr.Type {
		case unix.IFA_LOCAL:
			local = a.Value
		case unix.IFA_ADDRESS:
			address = a.Value
		}
	}
	if local == nil {
		local = address
	}
	a, ok := netip.AddrFromSlice(local)
	return a, ok
}

// addrWatch receives the kernel's notifications of address changes (the
// IPv4 and IPv6 ifaddr multicast groups) on a NETLINK_ROUTE socket of
// the namespace New ran in, so that CheckLocal learns of a VIP added to
// loopback at once rather than at the next LocalRefresh.
type addrWatch struct {
	f   *os.File
	buf []byte
}

func openAddrWatch() (*addrWatch, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("decap: netlink socket: %w", err)
	}
	sa := &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV6_IFADDR}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("decap: netlink bind to address notifications: %w", err)
	}
	return &addrWatch{f: os.NewFile(uintptr(fd), "netlink-route-ifaddr"), buf: make([]byte, netlinkBuf)}, nil
}

func (w *addrWatch) Close() error { return w.f.Close() }

// wait blocks until addresses may have changed: a notification arrived
// or, when the socket's buffer overflowed (ENOBUFS), some were lost. It
// returns the read's other errors (a deadline, the socket closed).
// What changed is not parsed: the caller reads the whole set again.
func (w *addrWatch) wait() error {
	_, err := w.f.Read(w.buf)
	if errors.Is(err, unix.ENOBUFS) {
		return nil
	}
	return err
}
