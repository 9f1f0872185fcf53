package arp

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/mdlayher/ndp"

	"github.com/vipd/vipd/internal/linkwatch"
)

// probe asks on the wire for the MACs of ws and returns the answers that
// arrive in time. Sockets are opened here, on the caller's goroutine (see the
// package doc on namespaces); the readers it starts only read.
func (r *Resolver) probe(ctx context.Context, links []linkwatch.Link, ws []want) map[hopKey][6]byte {
	byIndex := make(map[int]linkwatch.Link, len(links))
	for _, l := range links {
		byIndex[l.Index] = l
	}

	var (
		mu      sync.Mutex
		answers = map[hopKey][6]byte{}
		pending = map[hopKey]bool{}
		allDone = make(chan struct{})
		// done closes allDone once: the last answer (record) and the
		// pruning of hops no request can go to may both empty pending,
		// as an answer can come before any request (a gratuitous ARP
		// reply, an unsolicited NA) once a reader runs.
		doneOnce sync.Once
		done     = func() { doneOnce.Do(func() { close(allDone) }) }
	)
	for _, w := range ws {
		pending[w.hopKey] = true
	}
	// record is called by the readers for every candidate answer.
	record := func(key hopKey, mac [6]byte) {
		mu.Lock()
		defer mu.Unlock()
		if !pending[key] || !unicastMAC(mac) {
			return
		}
		delete(pending, key)
		answers[key] = mac
		if len(pending) == 0 {
			done()
		}
	}

	// One ARP and/or one NDP socket per interface involved.
	type sender struct {
		c     frameConn
		frame []byte
		key   hopKey
	}
	var (
		senders []sender
		conns   []frameConn
		wg      sync.WaitGroup
	)
	arpConns, ndpConns := map[int]frameConn{}, map[int]frameConn{}
	for _, w := range ws {
		l, ok := byIndex[w.ifindex]
		if !ok || l.MAC == ([6]byte{}) {
			r.log.Warn("cannot probe for a neighbor on a link without an Ethernet address", "addr", w.addr, "ifindex", w.ifindex)
			continue
		}
		v4 := w.addr.Is4()
		conns4or6 := ndpConns
		if v4 {
			conns4or6 = arpConns
		}
		c, ok := conns4or6[w.ifindex]
		if !ok {
			var err error
			if v4 {
				c, err = r.listen(w.ifindex, etherTypeARP, arpFilter())
			} else {
				c, err = r.listen(w.ifindex, etherTypeIPv6, ndpFilter(icmpv6TypeNA))
			}
			if err != nil {
				r.log.Warn("cannot open a socket to probe for neighbors", "ifname", l.Name, "err", err)
				conns4or6[w.ifindex] = nil
				continue
			}
			conns4or6[w.ifindex] = c
			conns = append(conns, c)
			wg.Add(1)
			go func(ifindex int, c frameConn, v4 bool) {
				defer wg.Done()
				readAnswers(c, ifindex, v4, record)
			}(w.ifindex, c, v4)
		}
		if c == nil {
			continue
		}
		src := probeSource(l, w.addr, w.src)
		var f []byte
		if v4 {
			f = arpFrame(broadcastMAC, arpRequest, l.MAC, src, [6]byte{}, w.addr)
		} else {
			var err error
			if f, err = neighborSolicitation(l.MAC, src, w.addr); err != nil {
				r.log.Warn("build neighbor solicitation", "addr", w.addr, "err", err)
				continue
			}
		}
		senders = append(senders, sender{c, f, w.hopKey})
	}

	// Hops no request could be sent for are given up now, so that allDone
	// can fire once the others have answered.
	mu.Lock()
	for key := range pending {
		if !slices.ContainsFunc(senders, func(s sender) bool { return s.key == key }) {
			delete(pending, key)
		}
	}
	if len(pending) == 0 {
		done()
	}
	mu.Unlock()

	timer := time.NewTimer(0)
	<-timer.C
tries:
	for try := 0; try < r.tries && len(senders) > 0; try++ {
		for _, s := range senders {
			mu.Lock()
			open := pending[s.key]
			mu.Unlock()
			if open {
				if err := s.c.WriteFrame(s.frame); err != nil {
					r.log.Debug("probe send failed", "addr", s.key.addr, "err", err)
				}
			}
		}
		timer.Reset(r.wait)
		select {
		case <-ctx.Done():
			break tries
		case <-allDone:
			break tries
		case <-timer.C:
		}
	}
	timer.Stop()
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	return answers
}

// readAnswers reads ARP replies (v4) or Neighbor Advertisements until c is
// closed and passes every sender/target it sees to record.
func readAnswers(c frameConn, ifindex int, v4 bool, record func(hopKey, [6]byte)) {
	b := make([]byte, maxFrameLen)
	for {
		n, err := c.ReadFrame(b)
		if err != nil {
			return // closed; or failed, and the probe times out
		}
		if v4 {
			m, err := parseARP(b[:n])
			if err == nil && m.op == arpReply {
				record(hopKey{ifindex, m.senderIP}, m.senderMAC)
			}
			continue
		}
		m, err := parseNDP(b[:n])
		if err != nil {
			continue
		}
		if na, ok := m.msg.(*ndp.NeighborAdvertisement); ok {
			mac := m.ethSrc
			if lla := linkLayerOption(na.Options, ndp.Target); lla != nil {
				mac = [6]byte(lla)
			}
			record(hopKey{ifindex, na.TargetAddress}, mac)
		}
	}
}

// probeSource picks the source address of a probe for target on l. The
// route's preferred source is what the kernel itself would use. IPv6
// link-local targets are asked from a link-local address, which needs no
// route back. Without any address, ARP asks from 0.0.0.0 (an ARP Probe,
// RFC 5227 §2.1.1) and NDP from :: (RFC 4861 §7.2.2); both get answers.
func probeSource(l linkwatch.Link, target, routeSrc netip.Addr) netip.Addr {
	if target.Is4() {
		if routeSrc.Is4() {
			return routeSrc
		}
		return pickAddr(l, target, func(a netip.Addr) bool { return a.Is4() }, netip.IPv4Unspecified())
	}
	ll := pickAddr(l, target, func(a netip.Addr) bool { return a.Is6() && a.IsLinkLocalUnicast() }, netip.Addr{})
	if target.IsLinkLocalUnicast() && ll.IsValid() {
		return ll
	}
	if routeSrc.Is6() && !routeSrc.Is4In6() {
		return routeSrc
	}
	global := pickAddr(l, target, func(a netip.Addr) bool { return a.Is6() && !a.IsLinkLocalUnicast() }, netip.Addr{})
	switch {
	case global.IsValid():
		return global
	case ll.IsValid():
		return ll
	}
	return netip.IPv6Unspecified()
}

// pickAddr returns l's first address accepted by ok, preferring one whose
// prefix contains target, or otherwise.
func pickAddr(l linkwatch.Link, target netip.Addr, ok func(netip.Addr) bool, otherwise netip.Addr) netip.Addr {
	first := otherwise
	for _, p := range l.Addrs {
		if !ok(p.Addr()) {
			continue
		}
		if p.Contains(target) {
			return p.Addr()
		}
		if first == otherwise {
			first = p.Addr()
		}
	}
	return first
}
