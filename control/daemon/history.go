package daemon

import (
	"github.com/vipd/vipd/control"
	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/dataplane"
)

// The last five minutes of each VIP's and backend's traffic, for the
// status page's sparklines: the rate sampler adds each second's increase
// of the counters to a point of histStep seconds, histPoints points per
// series. A series is kept from the first second its VIP or backend has
// traffic, for at most histMax of them (about 1.2 KB each): a box with
// more shows sparklines for the first histMax that had traffic.
const (
	histStep   = 5  // seconds per point
	histPoints = 60 // five minutes
	histMax    = 4096
)

// Per point: new flows, packets in, packets out, handshakes, answers.
const (
	hNew = iota
	hIn
	hOut
	hTried
	hAnswered
	hFields
)

// histSeries is one VIP's or backend's points; point p of the sampler's
// point count P lives in slot P % histPoints, last the newest written.
type histSeries struct {
	pts  [histPoints][hFields]uint32
	last int64
}

// history is every series, by VIP ID and backend ref.
type history struct {
	tick     int64 // seconds sampled
	vips     map[uint16]*histSeries
	backends map[uint32]*histSeries
}

// add records one second's increase from old to cur.
func (h *history) add(cur, old *dataplane.Counters) {
	if h.vips == nil {
		h.vips, h.backends = map[uint16]*histSeries{}, map[uint32]*histSeries{}
	}
	p := h.tick / histStep
	h.tick++
	for i := range cur.VIPs {
		addPoint(h.vips, uint16(i), p, &cur.VIPs[i], at(old.VIPs, i), h.size())
	}
	for i := range cur.Backends {
		addPoint(h.backends, uint32(i), p, &cur.Backends[i], at(old.Backends, i), h.size())
	}
}

func (h *history) size() int { return len(h.vips) + len(h.backends) }

// at is s[i], or zero counters past its end.
func at(s []dataplane.FlowCounters, i int) *dataplane.FlowCounters {
	if i < len(s) {
		return &s[i]
	}
	return &dataplane.FlowCounters{}
}

// addPoint adds c's increase over o to key's series at point p.
func addPoint[K comparable](m map[K]*histSeries, key K, p int64, c, o *dataplane.FlowCounters, size int) {
	d := [hFields]uint64{
		hNew: sub(c.NewFlows, o.NewFlows), hIn: sub(c.Packets, o.Packets), hOut: sub(c.OutPackets, o.OutPackets),
		hTried: sub(c.Handshakes, o.Handshakes), hAnswered: sub(c.Answered, o.Answered),
	}
	s := m[key]
	if s == nil {
		if d == ([hFields]uint64{}) || size >= histMax {
			return
		}
		s = &histSeries{last: p}
		m[key] = s
	}
	for q := s.last + 1; q <= p; q++ { // points with no second sampled: cleared
		s.pts[q%histPoints] = [hFields]uint32{}
	}
	if p > s.last {
		s.last = p
	}
	pt := &s.pts[p%histPoints]
	for f := range pt {
		pt[f] = uint32(min(uint64(pt[f])+d[f], 1<<32-1))
	}
}

// sub is cur-old, 0 for a counter that went back.
func sub(cur, old uint64) uint64 {
	if cur < old {
		return 0
	}
	return cur - old
}

// series returns s as the page draws it: per second over each point,
// oldest first, ending at point p (the sampler's current one).
func (s *histSeries) series(p int64) *api.History {
	h := &api.History{StepSeconds: histStep}
	for q := p - histPoints + 1; q <= p; q++ {
		var pt [hFields]uint32
		if q >= 0 && q > s.last-histPoints && q <= s.last {
			pt = s.pts[q%histPoints]
		}
		h.NewFlows = append(h.NewFlows, float64(pt[hNew])/histStep)
		h.InPackets = append(h.InPackets, float64(pt[hIn])/histStep)
		h.OutPackets = append(h.OutPackets, float64(pt[hOut])/histStep)
		share := -1.0 // no handshakes
		if pt[hTried] > 0 {
			share = min(float64(pt[hAnswered])/float64(pt[hTried]), 1)
		}
		h.Answered = append(h.Answered, share)
	}
	return h
}

// Histories implements admin.Provider: the sparklines' series of the
// running configuration's VIPs and backends that have one.
func (d *Daemon) Histories() *api.Histories {
	out := &api.Histories{VIPs: map[string]*api.History{}, Backends: map[string]*api.History{}}
	d.mu.Lock()
	defer d.mu.Unlock()
	s := &d.rates
	s.mu.Lock() // d.mu, then the sampler's: as State
	defer s.mu.Unlock()
	h := &s.hist
	if h.tick == 0 {
		return out
	}
	p := (h.tick - 1) / histStep
	for i := range d.cfg.VIPs {
		v := &d.cfg.VIPs[i]
		if id, err := d.reg.VIPID(control.VIPKey(v)); err == nil {
			if ser := h.vips[id]; ser != nil {
				out.VIPs[v.Name] = ser.series(p)
			}
		}
		for j := range v.Backends {
			b := &v.Backends[j]
			if ser := h.backends[d.reg.Ref(control.BackendKey(v, b))]; ser != nil {
				out.Backends[v.Name+" "+backendLabel(b)] = ser.series(p)
			}
		}
	}
	return out
}
