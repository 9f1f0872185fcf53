package arp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mdlayher/ndp"
	"golang.org/x/sys/unix"
)

// Announcement schedules. RFC 5227 §1.1: ANNOUNCE_NUM 2, ANNOUNCE_INTERVAL
// 2 s. RFC 4861 §7.2.6 and §10: up to MAX_NEIGHBOR_ADVERTISEMENT (3)
// unsolicited advertisements, at least RetransTimer (1 s) apart. The first one
// goes out as soon as the VIP is set.
const (
	announceNum4      = 2
	announceInterval4 = 2 * time.Second
	announceNum6      = 3
	announceInterval6 = 1 * time.Second

	// defendInterval is RFC 5227 §1.1 DEFEND_INTERVAL: at most one
	// defensive announcement per VIP in this time, so that two hosts that
	// both claim an address do not shout at each other forever.
	defendInterval = 10 * time.Second
)

// Responder answers for the VIPs at layer 2 on one interface: ARP requests
// (RFC 826) with the interface's MAC, Neighbor Solicitations (RFC 4861) with
// Neighbor Advertisements, and announces newly set VIPs. It runs off the
// packet path, on its own AF_PACKET sockets.
//
// The kernel must not own the VIPs on this interface (it would answer too)
// and must not proxy-ARP for them.
type Responder struct {
	ifindex int
	ifname  string
	// mac is the MAC answered and announced with, the interface's; SetMAC
	// changes it while Run runs.
	mac    atomic.Pointer[[6]byte]
	log    *slog.Logger
	listen listenFunc
	// Announcement spacing by family; the RFC values, shortened by tests.
	interval4, interval6 time.Duration
	// clock times defences (tests move it).
	clock func() time.Time

	vips atomic.Pointer[map[netip.Addr]struct{}]

	mu        sync.Mutex
	pending   map[netip.Addr]*announcement // announcements still to send
	lastGuard map[netip.Addr]time.Time     // last defence per VIP
	kick      chan struct{}                // cap 1: SetVIPs happened
	running   bool

	requests, replies, announcements, conflicts, sendErrors atomic.Uint64
}

type announcement struct {
	left int       // announcements still to send
	due  time.Time // when the next one is; zero: at once
}

func newAnnouncement(vip netip.Addr) *announcement {
	if vip.Is6() {
		return &announcement{left: announceNum6}
	}
	return &announcement{left: announceNum4}
}

// ResponderStats counts what a Responder saw and sent since it was created.
type ResponderStats struct {
	Requests      uint64 // ARP requests and Neighbor Solicitations received, for any address
	Replies       uint64 // ARP replies and solicited Neighbor Advertisements sent for VIPs
	Announcements uint64 // ARP Announcements and unsolicited Neighbor Advertisements sent
	Conflicts     uint64 // ARP or NDP packets from another host claiming a VIP
	SendErrors    uint64 // frames the socket refused
}

// NewResponder returns a Responder for the Ethernet interface ifi. It opens
// nothing: Run does. A nil log discards. The MAC it answers with is ifi's at
// this call; when linkwatch.Watch reports a new one, call SetMAC.
func NewResponder(ifi *net.Interface, log *slog.Logger) (*Responder, error) {
	if ifi == nil || ifi.Index <= 0 {
		return nil, errors.New("arp: responder needs an interface")
	}
	if len(ifi.HardwareAddr) != 6 {
		return nil, fmt.Errorf("arp: interface %s has no Ethernet address (%v)", ifi.Name, ifi.HardwareAddr)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Responder{
		ifindex:   ifi.Index,
		ifname:    ifi.Name,
		log:       log.With("ifname", ifi.Name),
		listen:    listenPacket,
		interval4: announceInterval4,
		interval6: announceInterval6,
		clock:     time.Now,
		pending:   map[netip.Addr]*announcement{},
		lastGuard: map[netip.Addr]time.Time{},
		kick:      make(chan struct{}, 1),
	}
	r.vips.Store(&map[netip.Addr]struct{}{})
	mac := [6]byte(ifi.HardwareAddr)
	r.mac.Store(&mac)
	return r, nil
}

// ownMAC is the MAC answered and announced with.
func (r *Responder) ownMAC() [6]byte { return *r.mac.Load() }

// SetMAC changes the MAC answered and announced with, when the
// interface's changed (linkwatch reports it): every VIP is announced again
// with the new one, as a newly set VIP is, so that the neighbors' caches
// follow at once. Safe from any goroutine.
func (r *Responder) SetMAC(mac [6]byte) {
	r.mu.Lock()
	if *r.mac.Load() == mac {
		r.mu.Unlock()
		return
	}
	r.mac.Store(&mac)
	for vip := range *r.vips.Load() {
		r.pending[vip] = newAnnouncement(vip)
	}
	r.mu.Unlock()
	r.log.Info("interface MAC changed: answering with it, and announcing every VIP again", "mac", net.HardwareAddr(mac[:]).String())
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// SetVIPs replaces the set of addresses answered for. Run announces
// addresses new to the set (first at once, then on the RFC schedule), as it
// announces all of them when it starts. SetVIPs never blocks on the network and is
// safe to call from any goroutine. IPv4-mapped IPv6 addresses count as IPv4;
// zones are dropped; unspecified and multicast addresses are ignored.
func (r *Responder) SetVIPs(addrs []netip.Addr) {
	set := make(map[netip.Addr]struct{}, len(addrs))
	for _, a := range addrs {
		a = a.Unmap().WithZone("")
		if !a.IsValid() || a.IsUnspecified() || a.IsMulticast() {
			continue
		}
		set[a] = struct{}{}
	}
	r.mu.Lock()
	old := *r.vips.Load()
	for a := range set {
		if _, ok := old[a]; !ok {
			r.pending[a] = newAnnouncement(a)
		}
	}
	for a := range r.pending {
		if _, ok := set[a]; !ok {
			delete(r.pending, a)
		}
	}
	for a := range r.lastGuard { // else it grows with every VIP ever defended
		if _, ok := set[a]; !ok {
			delete(r.lastGuard, a)
		}
	}
	r.vips.Store(&set)
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Stats returns the counters; safe from any goroutine.
func (r *Responder) Stats() ResponderStats {
	return ResponderStats{
		Requests:      r.requests.Load(),
		Replies:       r.replies.Load(),
		Announcements: r.announcements.Load(),
		Conflicts:     r.conflicts.Load(),
		SendErrors:    r.sendErrors.Load(),
	}
}

// Run opens the Responder's sockets (in the calling thread's network
// namespace), serves until ctx is done, closes them and returns nil. It
// returns an error when a socket cannot be opened or fails for good. Run may
// be called again after it returns, but not twice at once.
//
// A deleted interface is not an error here: the sockets stay open and idle
// and failed sends are counted; linkwatch.Watch tells the caller.
func (r *Responder) Run(ctx context.Context) error {
	r.mu.Lock()
	if r.running {
		r.mu.Unlock()
		return errors.New("arp: Responder.Run called twice")
	}
	r.running = true
	// Every VIP is announced when Run starts: this box may be taking over
	// from another, or coming back after a restart or a link failure.
	for vip := range *r.vips.Load() {
		r.pending[vip] = newAnnouncement(vip)
	}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.running = false
		r.mu.Unlock()
	}()

	arpConn, err := r.listen(r.ifindex, etherTypeARP, arpFilter())
	if err != nil {
		return fmt.Errorf("arp: listen for ARP on %s: %w", r.ifname, err)
	}
	ndpConn, err := r.listen(r.ifindex, etherTypeIPv6, ndpFilter(icmpv6TypeNS))
	if err != nil {
		arpConn.Close()
		return fmt.Errorf("arp: listen for NDP on %s: %w", r.ifname, err)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	failed := make(chan error, 2)
	var wg sync.WaitGroup
	for _, s := range []struct {
		c      frameConn
		handle func(frameConn, []byte)
	}{{arpConn, r.handleARP}, {ndpConn, r.handleNDP}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.serve(ctx, s.c, s.handle); err != nil {
				failed <- err
			}
		}()
	}

	err = r.announce(ctx, arpConn, ndpConn, failed)
	cancel()
	arpConn.Close()
	ndpConn.Close()
	wg.Wait()
	return err
}

// serve reads frames until ctx is done (the conn is then closed under it).
func (r *Responder) serve(ctx context.Context, c frameConn, handle func(frameConn, []byte)) error {
	b := make([]byte, maxFrameLen)
	for {
		n, err := c.ReadFrame(b)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			// The kernel reports a link going down once on every packet
			// socket bound to it, then delivers again when it comes back.
			if errors.Is(err, unix.ENETDOWN) {
				r.log.Warn("link down; waiting for it", "err", err)
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(100 * time.Millisecond): // never spin
				}
				continue
			}
			return fmt.Errorf("arp: read on %s: %w", r.ifname, err)
		}
		handle(c, b[:n])
	}
}

// handleARP answers a request for a VIP and watches for other hosts claiming
// one.
func (r *Responder) handleARP(c frameConn, b []byte) {
	m, err := parseARP(b)
	if err != nil || m.ethSrc == r.ownMAC() || m.senderMAC == r.ownMAC() || !unicastMAC(m.senderMAC) {
		return
	}
	vips := *r.vips.Load()
	switch m.op {
	case arpRequest:
		r.requests.Add(1)
		if _, ok := vips[m.targetIP]; !ok {
			return
		}
		if m.senderIP == m.targetIP {
			// Another host announces our VIP (RFC 5227 §2.4).
			r.defend(c, m.targetIP, m.senderMAC)
			return
		}
		// RFC 826: swap sender and target, fill in our hardware address,
		// send to the requester. A probe (sender 0.0.0.0, RFC 5227 §2.1.1)
		// is answered the same way, which tells the prober the VIP is taken.
		r.send(c, arpFrame(m.senderMAC, arpReply, r.ownMAC(), m.targetIP, m.senderMAC, m.senderIP), &r.replies)
	case arpReply:
		if _, ok := vips[m.senderIP]; ok {
			r.defend(c, m.senderIP, m.senderMAC)
		}
	}
}

// handleNDP answers a Neighbor Solicitation for a VIP (RFC 4861 §7.2.4).
func (r *Responder) handleNDP(c frameConn, b []byte) {
	m, err := parseNDP(b)
	if err != nil || m.ethSrc == r.ownMAC() {
		return
	}
	ns, ok := m.msg.(*ndp.NeighborSolicitation)
	if !ok {
		return
	}
	r.requests.Add(1)
	vip := ns.TargetAddress
	if _, ok := (*r.vips.Load())[vip]; !ok {
		return
	}
	if m.src.IsUnspecified() {
		// Duplicate address detection by another node for our VIP: the
		// answer goes to all nodes, unsolicited (§7.2.4), and is a
		// defence.
		r.defend(c, vip, m.ethSrc)
		return
	}
	dst := m.ethSrc
	if lla := linkLayerOption(ns.Options, ndp.Source); lla != nil {
		dst = [6]byte(lla)
	}
	f, err := ndpFrame(r.ownMAC(), dst, vip, m.src, neighborAdvertisement(vip, r.ownMAC(), true))
	if err != nil {
		r.log.Error("build neighbor advertisement", "vip", vip, "err", err)
		return
	}
	r.send(c, f, &r.replies)
}

// defend counts a conflict for vip and, at most once per defendInterval,
// re-announces it (RFC 5227 §2.4 (b); for IPv6 an unsolicited NA with
// Override set has the same effect).
func (r *Responder) defend(c frameConn, vip netip.Addr, other [6]byte) {
	r.conflicts.Add(1)
	now := r.clock()
	r.mu.Lock()
	last, seen := r.lastGuard[vip]
	act := !seen || now.Sub(last) >= defendInterval
	if act {
		r.lastGuard[vip] = now
	}
	r.mu.Unlock()
	if !act {
		return
	}
	r.log.Warn("another host claims a VIP; defending it", "vip", vip, "mac", net.HardwareAddr(other[:]).String())
	r.sendAnnouncement(c, vip)
}

func (r *Responder) sendAnnouncement(c frameConn, vip netip.Addr) {
	if vip.Is4() {
		r.send(c, arpAnnouncement(r.ownMAC(), vip), &r.announcements)
		return
	}
	f, err := unsolicitedNA(r.ownMAC(), vip)
	if err != nil {
		r.log.Error("build neighbor advertisement", "vip", vip, "err", err)
		return
	}
	r.send(c, f, &r.announcements)
}

func (r *Responder) send(c frameConn, f []byte, counter *atomic.Uint64) {
	if err := c.WriteFrame(f); err != nil {
		r.sendErrors.Add(1)
		r.log.Debug("send failed", "err", err)
		return
	}
	counter.Add(1)
}

// announce sends due announcements and keeps the NDP socket's multicast
// memberships equal to the VIPs' solicited-node groups, until ctx is done or
// a reader fails.
func (r *Responder) announce(ctx context.Context, arpConn, ndpConn frameConn, failed <-chan error) error {
	joined := map[[6]byte]bool{}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		r.syncMulticast(ndpConn, joined)
		now := time.Now()
		var due []netip.Addr
		next := now.Add(time.Hour)
		r.mu.Lock()
		for vip, a := range r.pending {
			if !a.due.After(now) {
				due = append(due, vip)
				a.left--
				interval := r.interval4
				if vip.Is6() {
					interval = r.interval6
				}
				a.due = now.Add(interval)
				if a.left <= 0 {
					delete(r.pending, vip)
					continue
				}
			}
			if a.due.Before(next) {
				next = a.due
			}
		}
		r.mu.Unlock()
		for _, vip := range due {
			if vip.Is4() {
				r.sendAnnouncement(arpConn, vip)
			} else {
				r.sendAnnouncement(ndpConn, vip)
			}
		}
		timer.Reset(next.Sub(now))
		select {
		case <-ctx.Done():
			return nil
		case err := <-failed:
			return err
		case <-r.kick:
		case <-timer.C:
		}
	}
}

// syncMulticast joins the solicited-node group of every IPv6 VIP and leaves
// groups no VIP needs. Without it a NIC's multicast filter drops the
// solicitations before any socket sees them (veth does not filter, real NICs
// do). Several VIPs can share a group (same low 24 bits).
func (r *Responder) syncMulticast(c frameConn, joined map[[6]byte]bool) {
	want := map[[6]byte]bool{}
	for vip := range *r.vips.Load() {
		if vip.Is6() {
			want[multicastMAC(solicitedNode(vip))] = true
		}
	}
	for mac := range want {
		if !joined[mac] {
			if err := c.JoinMulticast(mac); err != nil {
				r.log.Warn("join multicast group", "mac", net.HardwareAddr(mac[:]).String(), "err", err)
				continue
			}
			joined[mac] = true
		}
	}
	for mac := range joined {
		if !want[mac] {
			if err := c.LeaveMulticast(mac); err != nil {
				r.log.Warn("leave multicast group", "mac", net.HardwareAddr(mac[:]).String(), "err", err)
			}
			delete(joined, mac)
		}
	}
}

// unicastMAC reports whether mac can be a host's address: not zero, not
// broadcast or multicast (I/G bit clear).
func unicastMAC(mac [6]byte) bool { return mac != [6]byte{} && mac[0]&1 == 0 }
