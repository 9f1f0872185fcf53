package main

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/vipd/vipd/dataplane"
)

// params are the simulation's inputs.
type params struct {
	seed     uint64
	duration time.Duration
	rate     float64 // new flows per second, over both boxes
	// Backend capacities, which are also their configured weights: an
	// operator weighs backends by what they can take.
	capacities []uint32
	// Flow durations: Pareto with scale xm and shape alpha (heavy-tailed;
	// mean xm·alpha/(alpha−1)), at most maxDur.
	xm, alpha, maxDur float64
	// At slowAt, backend slowIdx slows down: flows it takes from then on
	// last slowFactor times longer.
	slowAt     time.Duration
	slowIdx    int
	slowFactor float64
	// At addAt a backend of capacity addCap joins; at removeAt backend
	// removeIdx leaves (its flows are placed anew).
	addAt, removeAt time.Duration
	addCap          uint32
	removeIdx       int
	// target is the share of the whole capacity the offered load uses:
	// a backend whose active flows exceed its capacity's share of
	// offered/target is overloaded.
	target       float64
	publishEvery time.Duration // the daemon's loadEvery
	sampleEvery  time.Duration
	probes       int // flows asked before and after a change
	agreeEvery   int // every how many new flows the other box is asked
}

func defaultParams() params {
	return params{
		seed: 1, duration: 120 * time.Second, rate: 3000,
		capacities: []uint32{1, 1, 2, 2, 3, 3, 4, 4},
		xm:         1, alpha: 1.5, maxDur: 60,
		slowAt: 40 * time.Second, slowIdx: 6, slowFactor: 4,
		addAt: 70 * time.Second, addCap: 2, removeAt: 90 * time.Second, removeIdx: 1,
		target: 0.7, publishEvery: time.Second, sampleEvery: 100 * time.Millisecond,
		probes: 20000, agreeEvery: 8,
	}
}

// result is one scheduler's outcome.
type result struct {
	sched         dataplane.Scheduler
	imbalance     float64 // time average of max/mean utilization
	overloaded    float64 // share of samples after slowAt with the slowed backend over capacity
	slowMean      float64 // the slowed backend's mean utilization after slowAt
	movedAdd      float64 // share of probe flows whose backend changes on the add
	movedRemove   float64 // of those not on the removed backend, on the remove
	agree         float64 // share of new flows the two boxes give the same backend
	slowUtil      []float64
	slowUtilTimes []float64
}

// backend is one simulated backend.
type backend struct {
	ref uint32
	cap uint32
}

// flow is a live flow: when it ends, on which box, which backend.
type flow struct {
	end float64
	box int
	ref uint32
	h   uint64
}

type flowHeap []*flow

func (f flowHeap) Len() int           { return len(f) }
func (f flowHeap) Less(i, j int) bool { return f[i].end < f[j].end }
func (f flowHeap) Swap(i, j int)      { f[i], f[j] = f[j], f[i] }
func (f *flowHeap) Push(x any)        { *f = append(*f, x.(*flow)) }
func (f *flowHeap) Pop() any {
	old := *f
	x := old[len(old)-1]
	*f = old[:len(old)-1]
	return x
}

const vipID = 1

// specOf is the one-VIP spec of backends bs under scheduler s.
func specOf(s dataplane.Scheduler, bs []backend) *dataplane.Spec {
	vs := dataplane.VIPSpec{
		ID: vipID, Name: "sim", Addr: netip.MustParseAddr("198.18.0.100"), Port: 80, Proto: 6,
		Mode: dataplane.ModeNAT, TableSize: 65537, Scheduler: s,
	}
	for _, b := range bs {
		vs.Backends = append(vs.Backends, dataplane.BackendSpec{
			Ref: b.ref, Addr: netip.AddrFrom4([4]byte{198, 18, 1, byte(10 + b.ref)}), Port: 8080,
			Weight: b.cap, State: dataplane.BackendUp,
		})
	}
	return &dataplane.Spec{Seed: 0x5f1b7a3c9e2d4b60, Host: dataplane.Host{MTU: [2]int{1500, 1500}}, VIPs: []dataplane.VIPSpec{vs}}
}

// simulate runs scheduler s over p.
func simulate(p params, s dataplane.Scheduler) (result, error) {
	res := result{sched: s}
	rng := rand.New(rand.NewPCG(p.seed, 0x5ced))
	var bs []backend
	for i, c := range p.capacities {
		bs = append(bs, backend{ref: uint32(i), cap: c})
	}
	slowRef := bs[p.slowIdx].ref
	snap, err := dataplane.NewSnapshot(specOf(s, bs))
	if err != nil {
		return res, err
	}
	boxes := [2]*dataplane.Chooser{dataplane.NewChooser(snap), dataplane.NewChooser(snap)}
	active := [2]map[uint32]int{{}, {}}
	var live flowHeap
	// The mean of the truncated Pareto distribution.
	meanDur := p.xm * p.alpha / (p.alpha - 1) * (1 - math.Pow(p.xm/p.maxDur, p.alpha-1))
	// perUnit: active flows one unit of capacity holds at 100%.
	perUnit := func() float64 {
		total := 0.0
		for _, b := range bs {
			total += float64(b.cap)
		}
		return p.rate * meanDur / total / p.target
	}
	endUntil := func(t float64) {
		for len(live) > 0 && live[0].end <= t {
			f := heap.Pop(&live).(*flow)
			active[f.box][f.ref]--
		}
	}
	start := func(t float64, box int, h uint64, dur float64) {
		ref, ok := boxes[box].Choose(vipID, h)
		if !ok {
			return
		}
		if ref == slowRef && t >= p.slowAt.Seconds() {
			dur *= p.slowFactor
		}

		active[box][ref]++
		heap.Push(&live, &flow{end: t + dur, box: box, ref: ref, h: h})
	}
	// moved returns the share of probe flows whose choice on box 0
	// differs between before and after (skipping those before chose
	// skip, when skip >= 0).
	moved := func(before, after *dataplane.Chooser, skip int64, prng *rand.Rand) float64 {
		n, m := 0, 0
		for i := 0; i < p.probes; i++ {
			h := prng.Uint64()
			a, _ := before.Clone().Choose(vipID, h)
			if int64(a) == skip {
				continue
			}
			b, _ := after.Clone().Choose(vipID, h)
			n++
			if a != b {
				m++
			}
		}
		return float64(m) / float64(max(n, 1))
	}
	change := func(nbs []backend, skip int64) (float64, error) {
		next, err := dataplane.NewSnapshotFrom(snap, specOf(s, nbs))
		if err != nil {
			return 0, err
		}
		before := boxes[0].Clone()
		for _, b := range boxes {
			b.SetSnapshot(next)
		}
		snap, bs = next, nbs
		return moved(before, boxes[0], skip, rand.New(rand.NewPCG(p.seed, 0x9e0be))), nil
	}
	end := p.duration.Seconds()
	nextPublish, nextSample := p.publishEvery.Seconds(), p.sampleEvery.Seconds()
	added, removed := false, false
	var imbSum float64
	var imbN, over, overN, agreeN, agreeOK, arrivals int
	t := 0.0
	for t < end {
		t += rng.ExpFloat64() / p.rate
		for tick := math.Min(nextPublish, nextSample); tick <= t && tick < end; tick = math.Min(nextPublish, nextSample) {
			endUntil(tick)
			if tick == nextPublish {
				for i, b := range boxes {
					b.Publish(snap.SumLoad(active[i]))
				}
				nextPublish += p.publishEvery.Seconds()
				continue
			}
			nextSample += p.sampleEvery.Seconds()
			pu := perUnit()
			var maxU, sumU, capSum float64
			for _, b := range bs {
				u := float64(active[0][b.ref]+active[1][b.ref]) / (float64(b.cap) * pu)
				maxU = math.Max(maxU, u)
				sumU += u * float64(b.cap)
				capSum += float64(b.cap)
			}
			if mean := sumU / capSum; mean > 0 {
				imbSum += maxU / mean
				imbN++
			}
			su := float64(active[0][slowRef]+active[1][slowRef]) / (float64(p.capacities[p.slowIdx]) * pu)
			res.slowUtil = append(res.slowUtil, su)
			res.slowUtilTimes = append(res.slowUtilTimes, tick)
			if tick >= p.slowAt.Seconds() {
				res.slowMean += su
				overN++
				if su > 1 {
					over++
				}
			}
		}
		if t >= end {
			break
		}
		endUntil(t)
		if !added && t >= p.addAt.Seconds() {
			added = true
			nbs := append(append([]backend(nil), bs...), backend{ref: uint32(len(p.capacities)), cap: p.addCap})
			if res.movedAdd, err = change(nbs, -1); err != nil {
				return res, err
			}
		}
		if !removed && t >= p.removeAt.Seconds() {
			removed = true
			goneRef := uint32(p.removeIdx)
			var nbs []backend
			for _, b := range bs {
				if b.ref != goneRef {
					nbs = append(nbs, b)
				}
			}
			if res.movedRemove, err = change(nbs, int64(goneRef)); err != nil {
				return res, err
			}
			// Its flows are placed anew by their box.
			for _, f := range live {
				if f.ref == goneRef {
					active[f.box][f.ref]--
					ref, _ := boxes[f.box].Choose(vipID, f.h)
					f.ref = ref
					active[f.box][ref]++
				}
			}
		}
		h := rng.Uint64()
		box := int(h >> 63) // ECMP: a hash of the flow picks the box
		dur := math.Min(p.xm*math.Pow(1-rng.Float64(), -1/p.alpha), p.maxDur)
		arrivals++
		if arrivals%p.agreeEvery == 0 {
			other, _ := boxes[1-box].Clone().Choose(vipID, h)
			mine, _ := boxes[box].Clone().Choose(vipID, h)
			agreeN++
			if other == mine {
				agreeOK++
			}
		}
		start(t, box, h, dur)
	}
	res.imbalance = imbSum / float64(max(imbN, 1))
	res.overloaded = float64(over) / float64(max(overN, 1))
	res.slowMean /= float64(max(overN, 1))
	res.agree = float64(agreeOK) / float64(max(agreeN, 1))
	return res, nil
}

// run simulates every scheduler.
func run(p params) ([]result, error) {
	var out []result
	for _, name := range dataplane.SchedulerNames() {
		s, _ := dataplane.ParseScheduler(name)
		r, err := simulate(p, s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, r)
	}
	return out, nil
}
