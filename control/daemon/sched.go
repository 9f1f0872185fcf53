package daemon

import (
	"context"
	"time"

	"github.com/vipd/vipd/control"
	"github.com/vipd/vipd/dataplane"
)

// loadEvery is how often the active flows per backend are summed over the
// workers for the load-aware schedulers (maglev_bounded, lc, p2c), while
// a VIP uses one. A sum is a walk of every worker's shard between its
// batches (flowCache, shared with /v1/state, at most flowsTTL old), so the
// loads a worker reads are at most loadEvery + flowsTTL + one walk old;
// its own new flows since count at once (dataplane.LoadBoard).
const loadEvery = time.Second

// loadRound makes one sum, if a VIP needs it.
func (d *Daemon) loadRound(ctx context.Context) {
	d.mu.Lock()
	need := false
	for i := range d.cfg.VIPs {
		need = need || schedulerUsesLoad(d.cfg.VIPs[i].Scheduler)
	}
	fc := d.flows
	d.mu.Unlock()
	if !need || fc == nil {
		return
	}
	flows, seq, err := fc.getWalk(ctx)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("summing active flows for the schedulers failed: they use the last sum", "err", err)
		}
		return
	}
	d.loadMu.Lock()
	defer d.loadMu.Unlock()
	snap := d.snaps.Load()
	if snap == nil || fc == d.loadFrom.fc && seq == d.loadFrom.seq && snap == d.loadFrom.snap {
		// The walk is one already published for this snapshot (a
		// /v1/state request made it, or this round came within flowsTTL
		// of the last): a new Load would only make every worker forget
		// the flows it pinned since, which the walk does not count.
		return
	}
	d.loads.Store(snap.SumLoad(flows))
	d.loadFrom.fc, d.loadFrom.seq, d.loadFrom.snap = fc, seq, snap
}

// schedulerUsesLoad reports whether scheduler name reads active flows.
func schedulerUsesLoad(name string) bool {
	s, ok := dataplane.ParseScheduler(name)
	return ok && s.UsesLoad()
}

// effectiveWeight is configured weight w (or the operator's override in
// st) after the fractions of st (slow start, load report), and the load
// report's fraction alone (1: none).
func effectiveWeight(w uint32, st control.Status) (eff, load float64) {
	if st.Weight > 0 {
		w = st.Weight // the operator's override
	}
	eff, load = float64(w), 1
	if f := st.Fraction(); f > 0 {
		eff *= f
	}
	if st.Scale > 0 && st.Scale < 1 {
		load = st.Scale
	}
	return eff, load
}
