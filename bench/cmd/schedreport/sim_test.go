package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/vipd/vipd/dataplane"
)

// TestReportDeterministic: the same flags print the same report.
func TestReportDeterministic(t *testing.T) {
	p := defaultParams()
	p.duration, p.rate, p.probes = 100*time.Second, 300, 2000
	var a, b bytes.Buffer
	for _, w := range []*bytes.Buffer{&a, &b} {
		rs, err := run(p)
		if err != nil {
			t.Fatal(err)
		}
		render(w, p, rs)
	}
	if a.String() != b.String() {
		t.Errorf("two runs differ:\n%s\n%s", a.String(), b.String())
	}
}

// TestReportShape: what the schedulers are for shows in a short run:
// Maglev's boxes always agree and move few flows; bounded Maglev and the
// load-aware schedulers balance better than Maglev.
func TestReportShape(t *testing.T) {
	p := defaultParams()
	p.rate, p.probes = 1000, 5000
	rs, err := run(p)
	if err != nil {
		t.Fatal(err)
	}
	by := map[dataplane.Scheduler]result{}
	for _, r := range rs {
		by[r.sched] = r
	}
	mg := by[dataplane.SchedMaglev]
	if mg.agree != 1 || mg.movedAdd > 0.15 || mg.movedRemove > 0.02 {
		t.Errorf("maglev: agree %v, moved %v/%v", mg.agree, mg.movedAdd, mg.movedRemove)
	}
	for _, s := range []dataplane.Scheduler{dataplane.SchedMaglevBounded, dataplane.SchedLC, dataplane.SchedP2C} {
		if by[s].imbalance >= mg.imbalance {
			t.Errorf("%v: max/mean %v, maglev %v", s, by[s].imbalance, mg.imbalance)
		}
	}
	if b := by[dataplane.SchedMaglevBounded]; b.agree < 0.9 {
		t.Errorf("maglev_bounded: boxes agree on %v", b.agree)
	}
}
