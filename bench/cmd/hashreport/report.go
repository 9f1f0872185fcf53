package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	vipdconfig "github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/hashing"
)

// config is what a report depends on.
type config struct {
	flows    int
	m        uint32 // Maglev table size
	seed     uint64 // PCG seed: flows and the choice of the removed backend
	hashSeed uint64 // flow-hash seed
	vnodes   int    // ring points per backend
}

func defaultConfig() config {
	return config{flows: 1_000_000, m: hashing.DefaultMaglevSize, seed: 1, hashSeed: vipdconfig.DefaultFlowHashSeed, vnodes: hashing.DefaultVnodes}
}

// The scenarios of the issue: add one backend to ten, remove one of a hundred.
const (
	addFrom    = 10
	removeFrom = 100
)

// row is one algorithm's results. Shares are fractions of all flows.
type row struct {
	name            string
	added, removed  float64       // flows remapped by the add and the remove
	load10, load100 float64       // max/mean flows per backend at N=10 and N=100
	build           time.Duration // build at N=100
	lookupNs        float64       // Flow4+Lookup per flow at N=100
	timed           bool          // false for the ideal row
}

type algorithm struct {
	name  string
	build func([]hashing.Backend) (hashing.Table, error)
}

func algorithms(cfg config) []algorithm {
	return []algorithm{
		{fmt.Sprintf("maglev (M=%d)", cfg.m), func(bs []hashing.Backend) (hashing.Table, error) {
			return asTable(hashing.NewMaglev(bs, cfg.m))
		}},
		{"mod-N", func(bs []hashing.Backend) (hashing.Table, error) { return asTable(hashing.NewModN(bs)) }},
		{fmt.Sprintf("ring (%d vnodes)", cfg.vnodes), func(bs []hashing.Backend) (hashing.Table, error) {
			return asTable(hashing.NewRing(bs, cfg.vnodes))
		}},
		{"rendezvous", func(bs []hashing.Backend) (hashing.Table, error) { return asTable(hashing.NewRendezvous(bs)) }},
	}
}

// asTable keeps a failed constructor's nil pointer out of the interface.
func asTable[T hashing.Table](t T, err error) (hashing.Table, error) {
	if err != nil {
		return nil, err
	}
	return t, nil
}

// flow is an IPv4 5-tuple.
type flow struct {
	src, dst     uint32
	sport, dport uint16
	proto        uint8
}

// scenario holds the inputs every algorithm is measured on.
type scenario struct {
	flows                   []flow
	hashes                  []uint64
	bs10, bs11, bs100, bs99 []hashing.Backend
}

func newScenario(cfg config) scenario {
	r := rand.New(rand.NewPCG(cfg.seed, 0x6861736872657074)) // "hashrept"
	var sc scenario
	sc.flows = make([]flow, cfg.flows)
	sc.hashes = make([]uint64, cfg.flows)
	for i := range sc.flows {
		// Random clients and ports towards a handful of TCP and UDP VIPs.
		f := flow{src: r.Uint32(), dst: 0xc6130000 | r.Uint32N(16), sport: uint16(r.Uint32()), dport: 443, proto: 6}
		if r.Uint32N(4) == 0 {
			f.dport, f.proto = 53, 17
		}
		sc.flows[i] = f
		sc.hashes[i] = hashing.Flow4(f.src, f.dst, f.sport, f.dport, f.proto, cfg.hashSeed)
	}
	sc.bs10, sc.bs11 = backends(addFrom), backends(addFrom+1)
	sc.bs100 = backends(removeFrom)
	gone := r.IntN(removeFrom)
	sc.bs99 = append(append([]hashing.Backend(nil), sc.bs100[:gone]...), sc.bs100[gone+1:]...)
	return sc
}

// backends returns n equal-weight backends named as the control plane would.
func backends(n int) []hashing.Backend {
	bs := make([]hashing.Backend, n)
	for i := range bs {
		bs[i] = hashing.Backend{ID: fmt.Sprintf("198.18.%d.%d:8080", 1+i/250, 1+i%250), Weight: 1}
	}
	return bs
}

// measure runs every algorithm through the scenario. The first row is the
// ideal: 1/11 and 1/100 of the flows moved, and as load the imbalance that
// sampling alone causes when each flow picks a backend uniformly at random,
// the floor any algorithm is measured against.
func measure(cfg config) ([]row, error) {
	if cfg.flows < 1 {
		return nil, fmt.Errorf("need at least one flow, got %d", cfg.flows)
	}
	sc := newScenario(cfg)
	r := rand.New(rand.NewPCG(cfg.seed, 0x756e69666f726d)) // "uniform"
	rows := []row{{
		name:    "ideal",
		added:   1.0 / (addFrom + 1),
		removed: 1.0 / removeFrom,
		load10:  loadOf(cfg.flows, addFrom, func(int) int { return r.IntN(addFrom) }),
		load100: loadOf(cfg.flows, removeFrom, func(int) int { return r.IntN(removeFrom) }),
	}}
	for _, alg := range algorithms(cfg) {
		res := row{name: alg.name, timed: true}
		t10, t11, t100, t99, err := buildAll(alg, sc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", alg.name, err)
		}
		idx10, idx100 := assign(t10, sc.hashes), assign(t100, sc.hashes)
		res.added = moved(idx10, sc.bs10, assign(t11, sc.hashes), sc.bs11)
		res.removed = moved(idx100, sc.bs100, assign(t99, sc.hashes), sc.bs99)
		res.load10 = loadOf(cfg.flows, addFrom, func(i int) int { return int(idx10[i]) })
		res.load100 = loadOf(cfg.flows, removeFrom, func(i int) int { return int(idx100[i]) })
		res.build = fastest(5, func() { _, _ = alg.build(sc.bs100) })
		all := fastest(3, func() { lookupAll(t100, sc.flows, cfg.hashSeed) })
		res.lookupNs = float64(all.Nanoseconds()) / float64(cfg.flows)
		rows = append(rows, res)
	}
	return rows, nil
}

func buildAll(alg algorithm, sc scenario) (t10, t11, t100, t99 hashing.Table, err error) {
	for _, b := range []struct {
		t  *hashing.Table
		bs []hashing.Backend
	}{{&t10, sc.bs10}, {&t11, sc.bs11}, {&t100, sc.bs100}, {&t99, sc.bs99}} {
		if *b.t, err = alg.build(b.bs); err != nil {
			return
		}
	}
	return
}

// assign looks every hash up in t.
func assign(t hashing.Table, hashes []uint64) []int32 {
	out := make([]int32, len(hashes))
	for i, h := range hashes {
		out[i] = int32(t.Lookup(h))
	}
	return out
}

// moved returns the fraction of flows whose backend ID differs between two
// assignments over different backend slices.
func moved(a []int32, bsA []hashing.Backend, b []int32, bsB []hashing.Backend) float64 {
	n := 0
	for i := range a {
		if bsA[a[i]].ID != bsB[b[i]].ID {
			n++
		}
	}
	return float64(n) / float64(len(a))
}

// loadOf returns max/mean of the flows per backend when flow i goes to
// backend pick(i).
func loadOf(flows, n int, pick func(i int) int) float64 {
	counts := make([]int, n)
	for i := range flows {
		counts[pick(i)]++
	}
	top := 0
	for _, c := range counts {
		top = max(top, c)
	}
	return float64(top) * float64(n) / float64(flows)
}

// lookupAll is the per-packet work: hash the tuple, look it up.
func lookupAll(t hashing.Table, flows []flow, seed uint64) int {
	sum := 0
	for i := range flows {
		f := &flows[i]
		sum += t.Lookup(hashing.Flow4(f.src, f.dst, f.sport, f.dport, f.proto, seed))
	}
	return sum
}

// fastest returns the shortest of n runs of f: on a shared machine the
// minimum is the least noisy estimate of the cost itself.
func fastest(n int, f func()) time.Duration {
	best := time.Duration(1<<63 - 1)
	for range n {
		start := time.Now()
		f()
		best = min(best, time.Since(start))
	}
	return best
}

// render prints the rows as one Markdown table with aligned columns.
func render(w io.Writer, cfg config, rows []row) {
	header := []string{
		"algorithm",
		fmt.Sprintf("add %d→%d: flows moved", addFrom, addFrom+1),
		fmt.Sprintf("remove %d→%d: flows moved", removeFrom, removeFrom-1),
		fmt.Sprintf("max/mean load N=%d", addFrom),
		fmt.Sprintf("max/mean load N=%d", removeFrom),
		fmt.Sprintf("build N=%d", removeFrom),
		fmt.Sprintf("lookup N=%d (ns, incl. Flow4)", removeFrom),
	}
	cells := [][]string{header}
	for _, r := range rows {
		c := []string{
			r.name,
			fmt.Sprintf("%.2f%%", 100*r.added),
			fmt.Sprintf("%.2f%%", 100*r.removed),
			fmt.Sprintf("%.3f", r.load10),
			fmt.Sprintf("%.3f", r.load100),
			"–", "–",
		}
		if r.timed {
			c[5] = fmt.Sprintf("%.3f ms", float64(r.build.Microseconds())/1000)
			c[6] = fmt.Sprintf("%.1f", r.lookupNs)
		}
		cells = append(cells, c)
	}
	width := make([]int, len(header))
	for _, c := range cells {
		for j, s := range c {
			width[j] = max(width[j], len([]rune(s)))
		}
	}
	fmt.Fprintf(w, "flows=%d m=%d seed=%d hashseed=%#x vnodes=%d\n\n", cfg.flows, cfg.m, cfg.seed, cfg.hashSeed, cfg.vnodes)
	line := func(c []string) {
		var sb strings.Builder
		sb.WriteString("|")
		for j, s := range c {
			pad := strings.Repeat(" ", width[j]-len([]rune(s)))
			if j == 0 {
				sb.WriteString(" " + s + pad + " |")
			} else {
				sb.WriteString(" " + pad + s + " |")
			}
		}
		fmt.Fprintln(w, sb.String())
	}
	line(cells[0])
	sep := make([]string, len(header))
	for j := range sep {
		if j == 0 {
			sep[j] = strings.Repeat("-", width[j])
		} else {
			sep[j] = strings.Repeat("-", width[j]-1) + ":"
		}
	}
	line(sep)
	for _, c := range cells[1:] {
		line(c)
	}
}
