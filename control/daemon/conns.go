package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"sync"

	"github.com/vipd/vipd/conntrack"
	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/dataplane"
)

// connVIP is what a listing needs of one VIP of the running spec.
type connVIP struct {
	name  string
	addr  netip.Addr
	proto uint8
	mode  dataplane.Mode
	prev  bool // it has a previous table
}

// Conns implements admin.ConnsProvider: the pinned flows matching q, from
// every worker's shard, at most q.Limit. Each worker copies its matching
// flows in bounded steps between its batches (Worker.ListFlows), filtered
// at the source, so a listing neither stalls forwarding nor copies more
// than the limit per worker. It is not a snapshot: a flow shows its state
// as of the step that copied it (a few ms old), and flows created or
// removed during the listing may be missed or shown.
func (d *Daemon) Conns(ctx context.Context, q api.ConnsQuery) (*api.Conns, error) {
	d.mu.Lock()
	if !d.servingLocked() || d.spec == nil {
		d.mu.Unlock()
		return nil, ErrNotRunning
	}
	workers := d.workers
	vips := map[uint16]connVIP{}
	backends := map[uint32]string{}
	keepVIP := map[uint16]bool{}
	keepRef := map[uint32]bool{}
	vipPort := -1 // the VIP filter's port, -1 for any
	var err error
	if q.VIP != "" {
		vipPort, err = matchVIP(d.spec, q.VIP, keepVIP)
	}
	var cl netip.Addr
	clPort := -1
	if err == nil && q.Client != "" {
		cl, clPort, err = parseAddrMaybePort(q.Client)
		if err != nil {
			err = fmt.Errorf("client %q: want ADDR or ADDR:PORT", q.Client)
		}
	}
	var be netip.Addr
	bePort := -1
	if err == nil && q.Backend != "" {
		be, bePort, err = parseAddrMaybePort(q.Backend)
		if err != nil {
			err = fmt.Errorf("backend %q: want ADDR or ADDR:PORT", q.Backend)
		}
	}
	for _, v := range d.spec.VIPs {
		vips[v.ID] = connVIP{name: v.Name, addr: v.Addr, proto: v.Proto, mode: v.Mode, prev: v.Previous != nil}
		for _, b := range v.Backends {
			s := b.Addr.String()
			if b.Port != 0 {
				s = netip.AddrPortFrom(b.Addr, b.Port).String()
			}
			backends[b.Ref] = s
			if be.IsValid() && b.Addr == be.Unmap() && (bePort < 0 || int(b.Port) == bePort) {
				keepRef[b.Ref] = true
			}
		}
	}
	fast := d.fastOn.Load()
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if q.Backend != "" && len(keepRef) == 0 {
		return nil, fmt.Errorf("no backend %s: %w", q.Backend, api.ErrNotFound)
	}
	limit := api.ConnsLimit(q.Limit)
	keep := connFilter(keepVIP, vipPort, q.VIP != "", cl, clPort, keepRef, q.Backend != "")
	flows, nows, err := listFlows(ctx, workers, keep, limit+1)
	if err != nil {
		return nil, err
	}
	ans := &api.Conns{Limit: limit, Conns: []api.Conn{}}
	snap := d.snaps.Load()
	for i, fs := range flows {
		for j := range fs {
			if len(ans.Conns) == limit {
				ans.Truncated = true
				break
			}
			ans.Conns = append(ans.Conns, describeConn(&fs[j], nows[i], vips, backends, fast, snap))
		}
	}
	// Workers answer in any order: sort for a stable, readable listing.
	sort.Slice(ans.Conns, func(i, j int) bool {
		a, b := &ans.Conns[i], &ans.Conns[j]
		if a.VIP != b.VIP {
			return a.VIP < b.VIP
		}
		if a.Backend != b.Backend {
			return a.Backend < b.Backend
		}
		return a.Client < b.Client
	})
	return ans, nil
}

// matchVIP adds to ids the VIPs of spec that name (a VIP's name, or its
// address with or without a port) stands for, and returns the port given
// (-1: none).
func matchVIP(spec *dataplane.Spec, name string, ids map[uint16]bool) (int, error) {
	for _, v := range spec.VIPs {
		if v.Name == name {
			ids[v.ID] = true
			return -1, nil
		}
	}
	a, port, err := parseAddrMaybePort(name)
	if err != nil {
		return -1, fmt.Errorf("no VIP %q: %w", name, api.ErrNotFound)
	}
	for _, v := range spec.VIPs {
		if v.Addr == a.Unmap() && (port < 0 || v.Port == 0 || int(v.Port) == port) {
			ids[v.ID] = true
		}
	}
	if len(ids) == 0 {
		return -1, fmt.Errorf("no VIP %q: %w", name, api.ErrNotFound)
	}
	return port, nil
}

// parseAddrMaybePort parses ADDR or ADDR:PORT ([v6]:PORT); port -1 for
// none.
func parseAddrMaybePort(s string) (netip.Addr, int, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), int(ap.Port()), nil
	}
	a, err := netip.ParseAddr(s)
	return a.Unmap(), -1, err
}

// connFilter returns the filter the workers run on each live flow. It only
// reads the maps and values it closes over, which nothing changes after.
func connFilter(vips map[uint16]bool, vipPort int, byVIP bool, cl netip.Addr, clPort int,
	refs map[uint32]bool, byBackend bool) func(*conntrack.Flow) bool {
	if !byVIP && !cl.IsValid() && !byBackend {
		return nil
	}
	var src [16]byte
	v6 := cl.Is6()
	if v6 {
		src = cl.As16()
	} else if cl.IsValid() {
		a := cl.As4()
		copy(src[:4], a[:])
	}
	return func(f *conntrack.Flow) bool {
		k := &f.Key
		switch {
		case byVIP && (!vips[k.VIP] || vipPort >= 0 && int(k.DstPort) != vipPort):
			return false
		case cl.IsValid() && (k.IPv6 != v6 || k.Src != src || clPort >= 0 && int(k.SrcPort) != clPort):
			return false
		case byBackend && !refs[f.Backend]:
			return false
		}
		return true
	}
}

// listFlows asks every worker for up to most matching flows, in parallel,
// and returns them per worker with each worker's clock.
func listFlows(ctx context.Context, workers []*dataplane.Worker, keep func(*conntrack.Flow) bool, most int) ([][]conntrack.Flow, []conntrack.Tick, error) {
	flows := make([][]conntrack.Flow, len(workers))
	nows := make([]conntrack.Tick, len(workers))
	errs := make([]error, len(workers))
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			flows[i], nows[i], errs[i] = w.ListFlows(ctx, keep, most)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, nil, err
		}
	}
	return flows, nows, nil
}

// describeConn turns a listed flow into what `vipd conns` shows.
func describeConn(f *conntrack.Flow, now conntrack.Tick, vips map[uint16]connVIP, backends map[uint32]string,
	fast bool, snap *dataplane.Snapshot) api.Conn {
	k := &f.Key
	client := netip.AddrPortFrom(k.SrcAddr(), k.SrcPort)
	v := vips[k.VIP]
	c := api.Conn{
		Protocol: protoName(k.Proto), Client: client.String(), VIP: v.name,
		VIPAddress: netip.AddrPortFrom(v.addr, k.DstPort).String(), State: f.State.String(),
		Backend: "?", FastPath: "off",
	}
	if v.name == "" {
		c.VIP = "?" // removed by a reload; the flow awaits its timeout
	}
	if s, ok := backends[f.Backend]; ok {
		c.Backend = s
	}
	if now > f.LastSeen {
		c.IdleSeconds = int64(now - f.LastSeen)
	}
	c.AgeSeconds = int64(f.Age)
	if fast {
		// The workers offer the XDP fast path the proven flows of VIPs
		// without a previous table (Worker.mayHandDown); whether the
		// kernel's map holds one now would cost a map lookup (a syscall)
		// per flow, and its entries expire there on their own.
		c.FastPath = "no"
		if (f.State == conntrack.StateEstablished || f.State == conntrack.StateUDP) && !v.prev {
			c.FastPath = "eligible"
		}
	}
	if v.prev && dataplane.Hinted(f) && snap != nil {
		if p, ok := snap.WherePrevious(v.addr, v.proto, k.DstPort, client); ok {
			c.Previous = p.String()
		}
	}
	return c
}

func protoName(p uint8) string {
	switch p {
	case 6:
		return "tcp"
	case 17:
		return "udp"
	}
	return strconv.Itoa(int(p))
}
