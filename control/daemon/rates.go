package daemon

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/vipd/vipd/control/admin"
	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/dataplane"
)

// rateInterval is how often the sampler reads the counters. A rate is the
// counters' increase over the last interval divided by its length: no
// smoothing (ipvsadm's estimator averages over about 2 s; this one answers
// "what happened in the last second", which is what vipd top shows).
const rateInterval = time.Second

// rateSampler turns the workers' monotonic counters into per-second rates.
type rateSampler struct {
	mu sync.Mutex
	// prev is the last sample, at prevAt; zero before the first.
	prev   []*dataplane.Counters
	prevAt time.Time
	// The rates of the last interval, by VIP ID, by backend ref and by
	// worker.
	vips, backends []api.Rates
	workers        []api.WorkerState
	// hs is every backend's handshake history (handshakes.go), fed with
	// each sample.
	hs handshakes
	// hist is the last five minutes for the page's sparklines
	// (history.go).
	hist history
}

// sample takes workers' counters read at now and computes the rates since
// the previous sample. A counter that went backwards (a worker replaced)
// counts as no traffic for the interval.
func (s *rateSampler) sample(cs []*dataplane.Counters, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, dt := s.prev, now.Sub(s.prevAt).Seconds()
	s.prev, s.prevAt = cs, now
	if prev == nil {
		// The first sample: the handshakes and the sparklines take what
		// was counted since the start as their first second.
		cur := dataplane.Sum(cs...)
		s.hs.sample(cur.Backends)
		s.hist.add(cur, &dataplane.Counters{})
		return
	}
	if dt <= 0 || len(prev) != len(cs) {
		return
	}
	cur, old := dataplane.Sum(cs...), dataplane.Sum(prev...)
	s.hs.sample(cur.Backends)
	s.hist.add(cur, old)
	s.vips, s.backends = flowRates(cur.VIPs, old.VIPs, dt), flowRates(cur.Backends, old.Backends, dt)
	s.workers = make([]api.WorkerState, len(cs))
	for i, c := range cs {
		p := prev[i]
		w := api.WorkerState{Queue: i, RxPackets: c.RxFrames,
			RxPerSec: perSec(c.RxFrames, p.RxFrames, dt),
			TxPerSec: perSec(c.Verdicts[dataplane.VerdictTX]+c.Verdicts[dataplane.VerdictReply],
				p.Verdicts[dataplane.VerdictTX]+p.Verdicts[dataplane.VerdictReply], dt),
		}
		for _, r := range dataplane.DropReasons() {
			w.DroppedTotal += c.Drops[r]
			if d := perSec(c.Drops[r], p.Drops[r], dt); d > 0 {
				if w.DropsPerSec == nil {
					w.DropsPerSec = map[string]float64{}
				}
				w.DropsPerSec[r.String()] = d
			}
		}
		s.workers[i] = w
	}
}

// perSec is the rate of a counter that went from old to cur in dt
// seconds; 0 if it went backwards.
func perSec(cur, old uint64, dt float64) float64 {
	if cur < old {
		return 0
	}
	return float64(cur-old) / dt
}

// flowRates are the rates of cur since old, dt seconds before, by index,
// the replies' too (the readers drop them where vipd sees none).
func flowRates(cur, old []dataplane.FlowCounters, dt float64) []api.Rates {
	out := make([]api.Rates, len(cur))
	for i := range cur {
		var o dataplane.FlowCounters
		if i < len(old) {
			o = old[i]
		}
		op, ob := perSec(cur[i].OutPackets, o.OutPackets, dt), perSec(cur[i].OutBytes, o.OutBytes, dt)
		out[i] = api.Rates{PacketsPerSec: perSec(cur[i].Packets, o.Packets, dt),
			BytesPerSec: perSec(cur[i].Bytes, o.Bytes, dt), NewFlowsPerSec: perSec(cur[i].NewFlows, o.NewFlows, dt),
			OutPacketsPerSec: &op, OutBytesPerSec: &ob}
	}
	return out
}

// withoutOut is r without its replies' rates (a DSR VIP's or backend's).
func withoutOut(r api.Rates) api.Rates {
	r.OutPacketsPerSec, r.OutBytesPerSec = nil, nil
	return r
}

// vip, backend and workerStates return the last interval's rates.
func (s *rateSampler) vip(id uint16) api.Rates {
	s.mu.Lock()
	defer s.mu.Unlock()
	if int(id) < len(s.vips) {
		return s.vips[id]
	}
	return api.Rates{}
}

func (s *rateSampler) backend(ref uint32) api.Rates {
	s.mu.Lock()
	defer s.mu.Unlock()
	if int(ref) < len(s.backends) {
		return s.backends[ref]
	}
	return api.Rates{}
}

func (s *rateSampler) workerStates() []api.WorkerState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]api.WorkerState(nil), s.workers...)
}

// runRates samples the workers' published counters every rateInterval
// until ctx ends. Reading them stops no worker (Worker.Published).
func (d *Daemon) runRates(ctx context.Context) {
	t := time.NewTicker(rateInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			workers, _ := d.dataplaneOf()
			cs := make([]*dataplane.Counters, len(workers))
			for i, w := range workers {
				cs[i] = w.Published()
			}
			d.rates.sample(cs, now)
			d.blackHoleRound(now)
			d.maxFlowsRound(ctx)
		}
	}
}

// activeFlows fills in m's active flows per backend (from the flow cache
// State uses, so a scrape walks the table at most once per flowsTTL) and
// the build information.
func (d *Daemon) activeFlows(m *admin.Metrics) {
	m.Version, m.GoVersion = d.opts.Version, runtime.Version()
	d.mu.Lock()
	running, cache := d.phase == phaseRunning, d.flows
	d.mu.Unlock()
	if !running || cache == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if flows, err := cache.get(ctx); err == nil {
		m.ActiveFlows = flows
	}
}
