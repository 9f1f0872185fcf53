package etcdtest

import (
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/vipd/vipd/testing/nstest"
)

// Proxy carries a namespace's connections to the cluster: inside the
// namespace it listens on 127.0.0.1 at every member's client port, and
// hands each connection to the member's port of the test's own loopback.
// A process in the namespace (a vipd box) then reaches the cluster at the
// very URLs Endpoints gives, and Cut stands for a partition between it
// and every member.
type Proxy struct {
	mu sync.Mutex
	// +checklocks:mu
	cut bool
	// +checklocks:mu
	conns map[net.Conn]struct{}
}

// ProxyInto starts a Proxy into ns for every member, running or not (a
// member killed refuses the proxied connections as it would direct ones,
// and one restarted takes them again). Cleanup closes it.
func (c *Cluster) ProxyInto(t testing.TB, ns *nstest.NS) *Proxy {
	t.Helper()
	p := &Proxy{conns: map[net.Conn]struct{}{}}
	for _, m := range c.members {
		to := m.client.Host
		at, err := netip.ParseAddrPort(to)
		if err != nil {
			t.Fatalf("etcdtest: member %s's client URL %s: %v", m.name, m.client.String(), err)
		}
		ns.ServeTCP(t, net.ListenConfig{}, at, func(in net.Conn) { p.serve(in, to) })
	}
	t.Cleanup(p.Cut)
	return p
}

// serve carries one connection from the namespace to addr.
func (p *Proxy) serve(in net.Conn, addr string) {
	defer in.Close()
	if !p.track(in) {
		return
	}
	defer p.untrack(in)
	out, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return // a member down: the client sees the refusal as a reset
	}
	defer out.Close()
	if !p.track(out) {
		return
	}
	defer p.untrack(out)
	done := make(chan struct{}, 2)
	go func() { io.Copy(out, in); done <- struct{}{} }()
	go func() { io.Copy(in, out); done <- struct{}{} }()
	<-done // either side ending ends both: the deferred closes
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

// Cut closes every proxied connection and refuses new ones until Restore:
// the namespace is cut off from every member.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
}

// Restore carries connections again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}
