package dataplane

import (
	"math"
	"math/bits"
	"slices"
	"sync/atomic"
)

// Scheduler picks the backend of a new flow (a conntrack miss). A flow
// already pinned keeps its backend whatever the scheduler; fragments and
// flows the table has no room for are always placed by Maglev, the only
// choice that needs no state.
type Scheduler uint8

const (
	// SchedMaglev: the VIP's weighted Maglev table alone.
	SchedMaglev Scheduler = iota
	// SchedMaglevBounded: consistent hashing with bounded loads (Mirrokni,
	// Thorup, Zadimoghaddam) over the Maglev table: the flow's Maglev
	// choice unless that backend's active flows reach its bound,
	// ceil(LoadBound × (active flows of the VIP + 1) × weight ÷ total
	// weight); then the next slots of the table after the flow's own, in
	// order, until a backend under its bound.
	SchedMaglevBounded
	// SchedWRR: smooth weighted round robin (nginx's), per worker.
	SchedWRR
	// SchedLC: weighted least connections, the least (active flows + 1) ÷
	// weight, ties broken from the flow hash.
	SchedLC
	// SchedP2C: power of two choices: two slots of the Maglev table drawn
	// from the flow hash (so weighted, and stable for the flow), the one
	// with fewer active flows per weight.
	SchedP2C
	numSchedulers
)

var schedNames = [numSchedulers]string{"maglev", "maglev_bounded", "wrr", "lc", "p2c"}

// String returns the configuration name of s.
func (s Scheduler) String() string {
	if s < numSchedulers {
		return schedNames[s]
	}
	return "scheduler(?)"
}

// ParseScheduler returns the scheduler configured as name.
func ParseScheduler(name string) (Scheduler, bool) {
	for i, n := range schedNames {
		if n == name {
			return Scheduler(i), true
		}
	}
	return 0, false
}

// SchedulerNames lists every scheduler's configuration name.
func SchedulerNames() []string { return append([]string(nil), schedNames[:]...) }

// Consistent reports whether every box with the same configuration gives a
// flow the same backend: true for Maglev, and for bounded Maglev as long as
// the boxes see the same loads (they see their own flows only, so they
// agree while no backend is at its bound).
func (s Scheduler) Consistent() bool { return s == SchedMaglev || s == SchedMaglevBounded }

// UsesLoad reports whether s reads active flows per backend.
func (s Scheduler) UsesLoad() bool {
	return s == SchedMaglevBounded || s == SchedLC || s == SchedP2C
}

// DefaultLoadBound is bounded Maglev's LoadBound when the spec gives none.
const DefaultLoadBound = 1.25

// boundedProbes is how many slots after its own a flow of a bounded
// Maglev VIP tries before it takes the least loaded of those it saw.
// The bounds add up to more than the active flows, so some backend is
// always under its own; 64 slots all over their bound is unlikely unless
// the loads the worker reads are stale.
const boundedProbes = 64

// p2cProbes is how many slots p2c walks to find a second candidate
// distinct from the first.
const p2cProbes = 8

// Load is the active flows per backend, summed over every worker by the
// control plane (Snapshot.SumLoad) and published through a LoadBoard.
// Workers only read it; it is never modified once published.
type Load struct {
	// Active is indexed by backend reference.
	Active []uint32
	// VIPs is indexed by VIP ID: the active flows of the VIP's backends
	// that take new flows.
	VIPs []uint32
}

// LoadBoard is where the control plane publishes the latest Load for the
// workers, which adopt it at the start of a batch. The daemon gives all
// workers the same one.
type LoadBoard struct{ p atomic.Pointer[Load] }

// Store publishes l.
func (b *LoadBoard) Store(l *Load) { b.p.Store(l) }

// Load returns the latest Load, nil if none.
func (b *LoadBoard) Load() *Load { return b.p.Load() }

// SumLoad turns flows per backend reference (the sum of the workers'
// CountFlows) into a Load for s's VIPs.
func (s *Snapshot) SumLoad(flows map[uint32]int) *Load {
	l := &Load{Active: make([]uint32, len(s.backends)), VIPs: make([]uint32, s.maxVIPID+1)}
	for ref, n := range flows {
		if int(ref) < len(l.Active) {
			l.Active[ref] = uint32(min(n, math.MaxUint32))
		}
	}
	for i := range s.vips {
		v := &s.vips[i]
		var t uint64
		for _, ref := range v.refs {
			t += uint64(l.Active[ref])
		}
		l.VIPs[v.id] = uint32(min(t, math.MaxUint32))
	}
	return l
}

// schedState is what a worker's schedulers keep: the Load it adopted, the
// new flows it pinned since (so that its own choices count at once, while
// the other workers' count from the next sum), and the smooth weighted
// round robin's current weights. It belongs to the worker's goroutine.
type schedState struct {
	board *LoadBoard
	load  *Load
	// pinned[ref] and pinnedVIP[id]: new flows since load was adopted.
	pinned    []uint32
	pinnedVIP []uint32
	// wrr[vi] is VIP vi's current weights, one per member (nil unless the
	// VIP's scheduler is wrr); wrrOf[vi] the VIP's ID and the members
	// (its refs) they are for.
	wrr   [][]int64
	wrrOf []wrrKey
}

// wrrKey names what a VIP's round-robin weights are for: the VIP's ID
// and its members in order (Snapshot.vips[i].refs, never written once the
// snapshot is built).
type wrrKey struct {
	id   uint16
	refs []uint32
}

// adopt takes up snap (when it changed) and the board's latest Load: it
// runs once per batch and allocates only when snap grew or changed.
func (st *schedState) adopt(snap *Snapshot, changed bool) {
	if changed {
		for len(st.pinned) < len(snap.backends) {
			st.pinned = append(st.pinned, 0)
		}
		for len(st.pinnedVIP) <= snap.maxVIPID {
			st.pinnedVIP = append(st.pinnedVIP, 0)
		}
		st.adoptWRR(snap)
	}
	if st.board == nil {
		return
	}
	if l := st.board.Load(); l != st.load {
		st.load = l
		clear(st.pinned)
		clear(st.pinnedVIP)
	}
}

// adoptWRR carries each round-robin VIP's round over to snap: a VIP whose
// members are the same (its ID, the same refs in the same order) goes on
// with its current weights, so that a publish for anything else (a health
// event or a slow-start step elsewhere, a weight change) does not restart
// its round, whose first pick is always the heaviest member; a VIP with
// new members starts anew.
func (st *schedState) adoptWRR(snap *Snapshot) {
	hasWRR := false
	for i := range snap.vips {
		hasWRR = hasWRR || snap.vips[i].sched == SchedWRR
	}
	if !hasWRR {
		st.wrr, st.wrrOf = nil, nil // nothing to carry, nothing to allocate
		return
	}
	var prev map[uint16]int // VIP ID -> index into st.wrr
	for j, k := range st.wrrOf {
		if st.wrr[j] != nil {
			if prev == nil {
				prev = make(map[uint16]int)
			}
			prev[k.id] = j
		}
	}
	wrr := make([][]int64, len(snap.vips))
	of := make([]wrrKey, len(snap.vips))
	for i := range snap.vips {
		v := &snap.vips[i]
		if v.sched != SchedWRR {
			continue
		}
		of[i] = wrrKey{v.id, v.refs}
		if j, ok := prev[v.id]; ok && slices.Equal(st.wrrOf[j].refs, v.refs) {
			wrr[i] = st.wrr[j]
		} else {
			wrr[i] = make([]int64, len(v.refs))
		}
	}
	st.wrr, st.wrrOf = wrr, of
}

// active returns the active flows of backend ref as the worker knows them.
func (st *schedState) active(ref uint32) uint64 {
	n := uint64(st.pinned[ref])
	if l := st.load; l != nil && int(ref) < len(l.Active) {
		n += uint64(l.Active[ref])
	}
	return n
}

// total returns the active flows of VIP v as the worker knows them.
func (st *schedState) total(v *vip) uint64 {
	n := uint64(st.pinnedVIP[v.id])
	if l := st.load; l != nil && int(v.id) < len(l.VIPs) {
		n += uint64(l.VIPs[v.id])
	}
	return n
}

// choose returns the member index (into v.refs) of a new flow with hash h
// for VIP vi of s by the VIP's scheduler, -1 if it has none.
func (st *schedState) choose(s *Snapshot, vi int, v *vip, h uint64) int {
	n := len(v.refs)
	if n == 0 {
		return -1
	}
	switch v.sched {
	case SchedMaglevBounded:
		return st.bounded(v, h)
	case SchedWRR:
		cur := st.wrr[vi]
		best := 0
		for k := range cur {
			cur[k] += int64(v.weights[k])
			if cur[k] > cur[best] {
				best = k
			}
		}
		cur[best] -= v.totalWeight
		return best
	case SchedLC:
		// Start at a member drawn from the hash, so that ties (an idle
		// VIP) spread rather than all go to the first.
		k0, _ := bits.Mul64(h, uint64(n))
		best, ba, bw := -1, uint64(0), uint64(1)
		for j := 0; j < n; j++ {
			k := int(k0) + j
			if k >= n {
				k -= n
			}
			a, w := st.active(v.refs[k])+1, uint64(v.weights[k])
			if best < 0 || a*bw < ba*w {
				best, ba, bw = k, a, w
			}
		}
		return best
	case SchedP2C:
		t := v.table
		i := t.At(t.Slot(h))
		s2 := t.Slot(bits.RotateLeft64(h, 32) * 0x9e3779b97f4a7c15)
		j := t.At(s2)
		// Two distinct candidates: the slots after the second one's
		// (Maglev's neighbours mostly differ).
		for p := 0; j == i && p < p2cProbes; p++ {
			if s2++; s2 == t.Size() {
				s2 = 0
			}
			j = t.At(s2)
		}
		if i == j {
			return i
		}
		ai, wi := st.active(v.refs[i])+1, uint64(v.weights[i])
		aj, wj := st.active(v.refs[j])+1, uint64(v.weights[j])
		if aj*wi < ai*wj {
			return j
		}
		return i
	}
	return v.table.Lookup(h)
}

// bounded is SchedMaglevBounded's choice.
func (st *schedState) bounded(v *vip, h uint64) int {
	t := v.table
	m := t.Size()
	s := t.Slot(h)
	// The bound of a member of weight w is ceil(c × (m+1) × w ÷ W) for m
	// active flows of total weight W: at least one flow each.
	scale := v.bound * float64(st.total(v)+1) / float64(v.totalWeight)
	best, bestRatio := -1, math.Inf(1)
	for p := 0; p < boundedProbes; p++ {
		k := t.At(s)
		w := float64(v.weights[k])
		a := float64(st.active(v.refs[k]))
		if a < math.Ceil(scale*w) {
			return k
		}
		if r := a / w; r < bestRatio {
			best, bestRatio = k, r
		}
		if s++; s == m {
			s = 0
		}
	}
	return best
}

// schedule returns the backend of a new flow with hash h for VIP vi and
// counts the flow as pinned by this worker (the caller pins it).
func (w *Worker) schedule(vi int, v *vip, h uint64) (*backend, uint32) {
	if v.sched == SchedMaglev {
		return w.maglev(v, h)
	}
	ref, ok := w.sch.pick(w.snap, vi, v, h)
	if !ok {
		return nil, 0
	}
	return &w.snap.backends[ref], ref
}

// pick is choose for a new flow that the caller pins: it returns the
// backend reference, false if the VIP has no member, and counts the flow
// as pinned here until the next Load.
func (st *schedState) pick(s *Snapshot, vi int, v *vip, h uint64) (uint32, bool) {
	k := st.choose(s, vi, v, h)
	if k < 0 {
		return 0, false
	}
	ref := v.refs[k]
	st.pinned[ref]++
	st.pinnedVIP[v.id]++
	return ref, true
}

// unpin takes back pick's count of a new flow for VIP v on ref that the
// caller could not pin after all (no room in the connection table).
func (st *schedState) unpin(v *vip, ref uint32) {
	if v.sched == SchedMaglev {
		return // schedule went straight to Maglev: nothing was counted
	}
	if int(ref) < len(st.pinned) && st.pinned[ref] > 0 {
		st.pinned[ref]--
	}
	if int(v.id) < len(st.pinnedVIP) && st.pinnedVIP[v.id] > 0 {
		st.pinnedVIP[v.id]--
	}
}

// setSched gives v its scheduler from vs and its members' weights from
// members (in the order of v.refs).
func (v *vip) setSched(vs *VIPSpec, members []member) {
	v.sched, v.bound = vs.Scheduler, vs.LoadBound
	if v.bound <= 1 {
		v.bound = DefaultLoadBound
	}
	v.weights, v.totalWeight = make([]uint32, len(members)), 0
	for k, m := range members {
		v.weights[k] = m.weight
		v.totalWeight += int64(m.weight)
	}
}

// Chooser runs a snapshot's scheduler outside the pipeline: the code a
// worker runs on a conntrack miss, with the loads it is given, for
// simulations (bench/cmd/schedreport) and tests. Like a worker, it
// counts its own choices on top of the last Load published on its board.
type Chooser struct {
	snap  *Snapshot
	st    schedState
	board LoadBoard
}

// NewChooser returns a Chooser over s with no load published yet.
func NewChooser(s *Snapshot) *Chooser {
	c := &Chooser{}
	c.st.board = &c.board
	c.SetSnapshot(s)
	return c
}

// SetSnapshot moves c to s, as a worker adopts a new snapshot (the smooth
// round robin starts over for the VIPs whose members changed, and only
// for them).
func (c *Chooser) SetSnapshot(s *Snapshot) {
	c.snap = s
	c.st.adopt(s, true)
}

// Publish makes l the load c's choices start from (Snapshot.SumLoad), as
// the control plane's periodic sum does; the choices c made before are
// then forgotten, as they are counted in l.
func (c *Chooser) Publish(l *Load) {
	c.board.Store(l)
	c.st.adopt(c.snap, false)
}

// Choose returns the backend reference a new flow with hash h for the VIP
// with ID id would get; ok is false when the VIP does not exist or has no
// backend taking new flows.
func (c *Chooser) Choose(id uint16, h uint64) (ref uint32, ok bool) {
	vi, found := c.snap.byID[id]
	if !found {
		return 0, false
	}
	return c.st.pick(c.snap, int(vi), &c.snap.vips[vi], h)
}

// Clone returns an independent copy of c: what c would choose next, asked
// without changing c (a simulation asks another box, say).
func (c *Chooser) Clone() *Chooser {
	d := &Chooser{snap: c.snap}
	d.board.Store(c.board.Load())
	d.st = schedState{
		board: &d.board, load: c.st.load,
		pinned:    append([]uint32(nil), c.st.pinned...),
		pinnedVIP: append([]uint32(nil), c.st.pinnedVIP...),
		wrr:       make([][]int64, len(c.st.wrr)),
		wrrOf:     append([]wrrKey(nil), c.st.wrrOf...),
	}
	for i, w := range c.st.wrr {
		if w != nil {
			d.st.wrr[i] = append([]int64(nil), w...)
		}
	}
	return d
}

// previous sets w.hint when VIP v's previous table gives hash h to another
// backend than b, and reports whether it did.
func (w *Worker) previous(v *vip, b *backend, h uint64) bool {
	i := v.prev.Lookup(h)
	if i < 0 {
		return false
	}
	if v.v6 {
		if v.prevAddr6[i] == b.addr6 {
			return false
		}
	} else if v.prevAddr4[i] == b.addr4 {
		return false
	}
	w.hint = int32(i)
	w.c.HintedPackets++
	return true
}

// maglev returns the backend Maglev picks for h.
func (w *Worker) maglev(v *vip, h uint64) (*backend, uint32) {
	i := v.table.Lookup(h)
	if i < 0 {
		return nil, 0
	}
	ref := v.refs[i]
	return &w.snap.backends[ref], ref
}
