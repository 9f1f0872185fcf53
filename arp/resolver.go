package arp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultRefresh is the Resolver's refresh interval when NewResolver is given
// none.
const DefaultRefresh = 30 * time.Second

// Probe schedule: up to probeTries requests, probeWait apart; an address
// that has not answered probeWait after the last one is unresolved. About a
// second in all, as the kernel's default (3 unicast/multicast probes, 1 s
// RetransTimer) would take per try.
const (
	probeTries = 3
	probeWait  = 333 * time.Millisecond
)

// NextHop is where frames for one address go on the wire.
type NextHop struct {
	MAC     [6]byte
	Ifindex int        // egress interface
	Via     netip.Addr // the gateway; invalid when the address is on-link
	// MTU is the route's MTU (RTAX_MTU, e.g. "ip route ... mtu 1400")
	// when the route sets one; 0 means the egress link's MTU applies.
	MTU int
}

// Resolver keeps next-hop MAC addresses for a set of target addresses (the
// backends, and any client gateways the caller needs) and for the default
// gateways, off the packet path. Lookup, NextHop and Gateway are lock-free
// reads of the last published answers and are safe from any goroutine; all
// the work happens in Run.
//
// How an answer is found, per target: the kernel's route to it (RTM_GETROUTE)
// gives the next hop — its gateway, or the target itself when on-link — and
// the egress interface. A kernel neighbor entry in state REACHABLE,
// PERMANENT, NOARP, DELAY or PROBE gives the MAC. Otherwise (no entry,
// INCOMPLETE, FAILED, STALE) the Resolver sends ARP requests (IPv6: Neighbor
// Solicitations) itself on that interface, up to 3 over about a second. A
// STALE entry's MAC is kept when nobody answers. Answers found on the wire are
// not written back to the kernel's table.
type Resolver struct {
	log     *slog.Logger
	refresh time.Duration
	dial    func() (kernel, error)
	listen  listenFunc
	tries   int
	wait    time.Duration

	mu      sync.Mutex
	targets []netip.Addr
	running bool
	kick    chan struct{} // cap 1: the targets changed

	state atomic.Pointer[resolution]
}

// resolution is one published set of answers; never modified once stored.
type resolution struct {
	hops map[netip.Addr]NextHop
	gw   [2]NextHop // [0] IPv4, [1] IPv6; Ifindex 0: none
}

func (s *resolution) equal(o *resolution) bool {
	return s.gw == o.gw && maps.Equal(s.hops, o.hops)
}

// NewResolver returns a Resolver that re-reads everything every refresh
// (DefaultRefresh when refresh <= 0). A nil log discards.
func NewResolver(log *slog.Logger, refresh time.Duration) *Resolver {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if refresh <= 0 {
		refresh = DefaultRefresh
	}
	r := &Resolver{
		log:     log,
		refresh: refresh,
		dial:    dialKernel,
		listen:  listenPacket,
		tries:   probeTries,
		wait:    probeWait,
		kick:    make(chan struct{}, 1),
	}
	r.state.Store(&resolution{hops: map[netip.Addr]NextHop{}})
	return r
}

// SetTargets replaces the addresses to keep resolved. A change starts a
// resolution round in Run at once; answers for removed targets disappear
// with it. IPv4-mapped addresses count as IPv4; zones are dropped.
func (r *Resolver) SetTargets(addrs []netip.Addr) {
	ts := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if a = a.Unmap().WithZone(""); a.IsValid() {
			ts = append(ts, a)
		}
	}
	slices.SortFunc(ts, netip.Addr.Compare)
	ts = slices.Compact(ts)
	r.mu.Lock()
	changed := !slices.Equal(ts, r.targets)
	r.targets = ts
	r.mu.Unlock()
	if changed {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
}

// Lookup returns the next-hop MAC for addr, if the last round found one.
func (r *Resolver) Lookup(addr netip.Addr) (mac [6]byte, ok bool) {
	h, ok := r.state.Load().hops[addr.Unmap()]
	return h.MAC, ok
}

// NextHop returns everything the last round found for addr.
func (r *Resolver) NextHop(addr netip.Addr) (NextHop, bool) {
	h, ok := r.state.Load().hops[addr.Unmap()]
	return h, ok
}

// Gateway returns the MAC and egress interface of the default route's
// gateway for IPv4 (v6 false) or IPv6: where replies to clients outside the
// connected subnets go. ok is false when there is no default route with a
// gateway, or the gateway did not answer.
func (r *Resolver) Gateway(v6 bool) (mac [6]byte, ifindex int, ok bool) {
	i := 0
	if v6 {
		i = 1
	}
	g := r.state.Load().gw[i]
	return g.MAC, g.Ifindex, g.Ifindex != 0
}

// Run opens an rtnetlink socket (and, during rounds, AF_PACKET sockets) in
// the calling thread's network namespace, resolves the targets at once, then
// every refresh and whenever SetTargets changes them, until ctx is done; then
// it returns nil. It returns an error only when rtnetlink cannot be opened:
// a round that fails keeps the previous answers and is logged.
//
// onChange (may be nil) is called on Run's goroutine after a round whose
// answers differ from the previous ones have been published, so Lookup
// already returns them; it should return quickly. Run must not be called
// twice at once.
func (r *Resolver) Run(ctx context.Context, onChange func()) error {
	r.mu.Lock()
	if r.running {
		r.mu.Unlock()
		return errors.New("arp: Resolver.Run called twice")
	}
	r.running = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.running = false
		r.mu.Unlock()
	}()

	k, err := r.dial()
	if err != nil {
		return err
	}
	defer k.Close()

	ticker := time.NewTicker(r.refresh)
	defer ticker.Stop()
	notes := map[netip.Addr]string{} // last logged outcome per target, to log changes only
	for {
		// This round reads the latest targets: a change signalled before
		// it needs no round of its own.
		select {
		case <-r.kick:
		default:
		}
		next, err := r.round(ctx, k, notes)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			r.log.Warn("next-hop resolution failed; keeping previous answers", "err", err)
		} else if !next.equal(r.state.Load()) {
			r.state.Store(next)
			if onChange != nil {
				onChange()
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-r.kick:
		case <-ticker.C:
		}
	}
}

// hopKey names a neighbor: the same address on two links is two neighbors.
type hopKey struct {
	ifindex int
	addr    netip.Addr
}

// want is a next hop that a round needs a MAC for.
type want struct {
	hopKey
	src netip.Addr // the route's preferred source, may be invalid
}

// round reads the kernel, probes what it does not know and returns the new
// answers. notes is Run's memory of what it logged.
func (r *Resolver) round(ctx context.Context, k kernel, notes map[netip.Addr]string) (*resolution, error) {
	r.mu.Lock()
	targets := slices.Clone(r.targets)
	r.mu.Unlock()

	links, err := k.Links()
	if err != nil {
		return nil, err
	}
	routes, err := k.Routes()
	if err != nil {
		return nil, err
	}
	neighs, err := k.Neighbors()
	if err != nil {
		return nil, err
	}

	// Where each target goes.
	type plan struct {
		hop NextHop // MAC filled in below
		key hopKey
	}
	plans := map[netip.Addr]plan{}
	wants := map[hopKey]want{}
	note := func(t netip.Addr, msg string, args ...any) {
		if notes[t] != msg {
			notes[t] = msg
			r.log.Warn(msg, append([]any{"addr", t}, args...)...)
		}
	}
	for _, t := range targets {
		rt, err := k.RouteTo(t)
		if err != nil {
			note(t, "no route to next-hop target", "err", err)
			continue
		}
		if rt.Type != unix.RTN_UNICAST || rt.Ifindex == 0 {
			note(t, "next-hop target is not reachable through a unicast route", "type", rt.Type)
			continue
		}
		hop, key := NextHop{Ifindex: rt.Ifindex, MTU: rt.MTU}, hopKey{rt.Ifindex, t}
		if rt.Gateway.IsValid() {
			hop.Via, key.addr = rt.Gateway, rt.Gateway
		}
		plans[t] = plan{hop, key}
		if _, ok := wants[key]; !ok || !wants[key].src.IsValid() {
			wants[key] = want{key, rt.Src}
		}
	}

	// The default gateways.
	var gws [2]*plan
	for i, v6 := range []bool{false, true} {
		if d, ok := defaultRoute(routes, v6); ok {
			p := plan{NextHop{Ifindex: d.Ifindex, Via: d.Gateway, MTU: d.MTU}, hopKey{d.Ifindex, d.Gateway}}
			gws[i] = &p
			if _, ok := wants[p.key]; !ok {
				wants[p.key] = want{p.key, d.Src}
			}
		}
	}

	// What the kernel knows, and what must be asked on the wire.
	known := make(map[hopKey]neighbor, len(neighs))
	for _, n := range neighs {
		known[hopKey{n.Ifindex, n.Addr}] = n
	}
	macs := map[hopKey][6]byte{}
	var ask []want
	for key, w := range wants {
		if n, ok := known[key]; ok && n.usable() {
			macs[key] = n.MAC
			continue
		}
		ask = append(ask, w)
	}
	if len(ask) > 0 {
		for key, mac := range r.probe(ctx, links, ask) {
			macs[key] = mac
		}
		for _, w := range ask {
			if _, ok := macs[w.hopKey]; !ok {
				if n, ok := known[w.hopKey]; ok && n.stale() {
					macs[w.hopKey] = n.MAC
				}
			}
		}
	}

	res := &resolution{hops: make(map[netip.Addr]NextHop, len(plans))}
	for t, p := range plans {
		mac, ok := macs[p.key]
		if !ok {
			if p.hop.Via.IsValid() {
				note(t, "gateway did not answer", "gateway", p.hop.Via)
			} else {
				note(t, "next-hop target did not answer")
			}
			continue
		}
		p.hop.MAC = mac
		res.hops[t] = p.hop
		if msg := fmt.Sprintf("resolved %v via %v on %d", net.HardwareAddr(mac[:]), p.hop.Via, p.hop.Ifindex); notes[t] != msg {
			notes[t] = msg
			r.log.Info("next hop resolved", "addr", t, "mac", net.HardwareAddr(mac[:]).String(), "via", p.hop.Via, "ifindex", p.hop.Ifindex)
		}
	}
	for t := range notes {
		if !slices.Contains(targets, t) {
			delete(notes, t)
		}
	}
	for i, p := range gws {
		if p == nil {
			continue
		}
		if mac, ok := macs[p.key]; ok {
			p.hop.MAC = mac
			res.gw[i] = p.hop
		}
	}
	return res, nil
}

// defaultRoute returns the family's default route with a gateway and the
// lowest metric. A default route without a gateway ("default dev eth0")
// makes every address on-link and has no single next hop.
func defaultRoute(routes []route, v6 bool) (route, bool) {
	var best route
	found := false
	for _, rt := range routes {
		if rt.Dst.Bits() != 0 || rt.Dst.Addr().Is6() != v6 || !rt.Gateway.IsValid() || rt.Ifindex == 0 {
			continue
		}
		if !found || rt.Priority < best.Priority {
			best, found = rt, true
		}
	}
	return best, found
}
