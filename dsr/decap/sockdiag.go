//go:build linux

package decap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/vipd/vipd/packet"
)

// sockDiag is the kernel's SocketLookup: one exact-match query per
// lookup on a NETLINK_SOCK_DIAG socket (SOCK_DIAG_BY_FAMILY with an
// inet_diag_req_v2 and without NLM_F_DUMP), the way ss(8) asks about one
// socket; it never walks a socket table. The socket belongs to the
// network namespace of the thread that opened it.
type sockDiag struct {
	mu sync.Mutex // serializes a request and its deadline
	c  *netlink.Conn
	// ns is the network namespace the socket was opened in (an open
	// /proc/thread-self/ns/net), for a socket opened anew after a failed
	// query.
	ns int
	// timeout bounds one query (sockDiagTimeout; tests shorten it).
	timeout time.Duration
}

// sockDiagTimeout bounds one lookup; the kernel answers in microseconds.
const sockDiagTimeout = 250 * time.Millisecond

// Layout of struct inet_diag_req_v2 (linux/inet_diag.h), 56 bytes:
//
//	u8 family, u8 protocol, u8 ext, u8 pad, u32 states,
//	inet_diag_sockid: be16 sport, be16 dport, be32 src[4], be32 dst[4],
//	                  u32 if, u32 cookie[2]
//
// and of the reply, struct inet_diag_msg: u8 family, state, timer,
// retrans, then the same inet_diag_sockid at offset 4.
const (
	diagReqLen      = 56
	diagReqSockID   = 8 // offset of the sockid in the request
	diagMsgSockID   = 4 // and in the reply
	diagSockIDLen   = 48
	diagIDSport     = 0
	diagIDDport     = 2
	diagIDSrc       = 4
	diagIDDst       = 20
	diagIDCookie    = 40
	sockDiagByFam   = 20         // SOCK_DIAG_BY_FAMILY
	diagNoCookie    = 0xffffffff // INET_DIAG_NOCOOKIE: do not check the cookie
	diagAllStates   = 0xffffffff
	netlinkSockDiag = unix.NETLINK_INET_DIAG // the same number
)

func openSockDiag() (*sockDiag, error) {
	ns, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("decap: sock_diag: this thread's network namespace: %w", err)
	}
	c, err := netlink.Dial(netlinkSockDiag, &netlink.Config{NetNS: ns})
	if err != nil {
		unix.Close(ns)
		return nil, fmt.Errorf("decap: sock_diag netlink socket: %w", err)
	}
	return &sockDiag{c: c, ns: ns, timeout: sockDiagTimeout}, nil
}

func (s *sockDiag) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.c.Close()
	unix.Close(s.ns)
	return err
}

// reopenLocked replaces the socket after a query failed. A reply that
// came after the query's deadline stays queued on the socket and would
// be read as the answer to the next query, and every query after it
// would be one answer behind (a stale "no such socket" reads as "not
// here": a local flow chained away); a new socket starts in step. If no
// new socket can be opened the old one stays.
func (s *sockDiag) reopenLocked() {
	if c, err := netlink.Dial(netlinkSockDiag, &netlink.Config{NetNS: s.ns}); err == nil {
		s.c.Close()
		s.c = c
	}
}

// Lookup asks the kernel for the socket that would receive a packet from
// remote to local. The kernel's exact lookup falls back, when no
// connected socket matches, to a listener (TCP) or an unconnected socket
// (UDP); those report remote address and port 0, so the reply counts as
// a match only when it names remote. No socket at all is ENOENT: not a
// match.
func (s *sockDiag) Lookup(proto uint8, local, remote netip.AddrPort) (bool, error) {
	remote = netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port())
	peer, found, err := s.query(proto, local, remote)
	return found && peer == remote, err
}

// query asks the kernel for the socket that would receive a packet of
// protocol proto from remote to local, and returns its peer (unmapped):
// remote for a connected socket, the zero address and port for a
// listener or an unconnected UDP socket. found is false when there is no
// socket at all.
func (s *sockDiag) query(proto uint8, local, remote netip.AddrPort) (peer netip.AddrPort, found bool, err error) {
	if proto != packet.ProtoTCP && proto != packet.ProtoUDP {
		return peer, false, fmt.Errorf("decap: sock_diag lookup of protocol %d", proto)
	}
	local = netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
	remote = netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port())
	if local.Addr().Is4() != remote.Addr().Is4() {
		return peer, false, errors.New("decap: sock_diag lookup across families")
	}
	var req [diagReqLen]byte
	req[0] = unix.AF_INET
	if local.Addr().Is6() {
		req[0] = unix.AF_INET6
	}
	req[1] = proto
	binary.NativeEndian.PutUint32(req[4:], diagAllStates)
	// TCP looks the socket up as for a packet from dst to src (src is the
	// socket's own end, as in a dump); UDP the other way round, which the
	// kernel's udp_diag calls swapped "for historical reasons".
	src, dst := local, remote
	if proto == packet.ProtoUDP {
		src, dst = remote, local
	}
	id := req[diagReqSockID : diagReqSockID+diagSockIDLen]
	binary.BigEndian.PutUint16(id[diagIDSport:], src.Port())
	binary.BigEndian.PutUint16(id[diagIDDport:], dst.Port())
	putDiagAddr(id[diagIDSrc:], src.Addr())
	putDiagAddr(id[diagIDDst:], dst.Addr())
	binary.NativeEndian.PutUint32(id[diagIDCookie:], diagNoCookie)
	binary.NativeEndian.PutUint32(id[diagIDCookie+4:], diagNoCookie)

	s.mu.Lock()
	defer s.mu.Unlock()
	// The kernel answers inside the send (netlink to the kernel is
	// synchronous): the deadline bounds the wait for the reply. A thread
	// stalled past it after the send fails the read with the reply queued.
	if err := s.c.SetReadDeadline(time.Now().Add(s.timeout)); err != nil {
		return peer, false, err
	}
	msgs, err := s.c.Execute(netlink.Message{
		Header: netlink.Header{Type: sockDiagByFam, Flags: netlink.Request},
		Data:   req[:],
	})
	if errors.Is(err, unix.ENOENT) {
		return peer, false, nil
	}
	if err != nil {
		s.reopenLocked()
		return peer, false, fmt.Errorf("decap: sock_diag lookup: %w", err)
	}
	for _, m := range msgs {
		if m.Header.Type != sockDiagByFam || len(m.Data) < diagMsgSockID+diagSockIDLen {
			continue
		}
		// The reply names the socket's own end src and its peer dst,
		// whatever the request's order; a socket of family AF_INET6 that
		// carries IPv4 (a dual-stack listener's child) has them mapped.
		rid := m.Data[diagMsgSockID : diagMsgSockID+diagSockIDLen]
		return netip.AddrPortFrom(diagAddr(m.Data[0], rid[diagIDDst:]), binary.BigEndian.Uint16(rid[diagIDDport:])), true, nil
	}
	return peer, false, errors.New("decap: sock_diag lookup: no socket in the reply")
}

func putDiagAddr(b []byte, a netip.Addr) {
	if a.Is4() {
		v := a.As4()
		copy(b, v[:])
		return
	}
	v := a.As16()
	copy(b, v[:])
}

// diagAddr reads an address of the given family from a sockid field,
// unmapped.
func diagAddr(family byte, b []byte) netip.Addr {
	if family == unix.AF_INET {
		return netip.AddrFrom4([4]byte(b))
	}
	return netip.AddrFrom16([16]byte(b)).Unmap()
}
