package outlier

import (
	"testing"
	"time"
)

var cfg = Config{
	Window: 10 * time.Second, Timeout: 2 * time.Second, MinHandshakes: 10, Ratio: 0.5,
	BaseEjection: 30 * time.Second, MaxEjection: 100 * time.Second, MaxEjectedPercent: 50,
}

// sim drives a Detector one second at a time: each backend starts rate
// handshakes per second, of which it answers answer (a fraction) one
// second later.
type sim struct {
	d      *Detector
	now    time.Time
	counts map[uint32]*Counts
	answer map[uint32]float64
	rate   map[uint32]uint64
	vip    map[uint32]string
	up     map[uint32]bool
	acc    map[uint32]float64 // answers owed, fractional
}

func newSim(backends map[uint32]string) *sim {
	s := &sim{d: New(), now: time.Unix(1e9, 0), counts: map[uint32]*Counts{}, answer: map[uint32]float64{},
		rate: map[uint32]uint64{}, vip: backends, up: map[uint32]bool{}, acc: map[uint32]float64{}}
	for ref, v := range backends {
		s.d.SetConfig(v, cfg)
		s.counts[ref] = &Counts{}
		s.answer[ref], s.rate[ref], s.up[ref] = 1, 20, true
	}
	return s
}

// step advances one second and returns the changes Evaluate decided.
func (s *sim) step() []Change {
	s.now = s.now.Add(time.Second)
	for ref, c := range s.counts {
		s.acc[ref] += s.answer[ref] * float64(s.rate[ref]) // answers to last second's handshakes
		n := uint64(s.acc[ref])
		s.acc[ref] -= float64(n)
		c.Answered += n
		c.Handshakes += s.rate[ref]
		s.d.Observe(s.now, s.vip[ref], ref, *c)
	}
	return s.d.Evaluate(s.now, func(ref uint32) bool { return s.up[ref] })
}

func (s *sim) run(secs int) (ejected, returned map[uint32]time.Duration) {
	ejected, returned = map[uint32]time.Duration{}, map[uint32]time.Duration{}
	start := s.now
	for i := 0; i < secs; i++ {
		for _, c := range s.step() {
			if c.Ejected {
				ejected[c.Ref] = s.now.Sub(start)
			} else {
				returned[c.Ref] = s.now.Sub(start)
			}
		}
	}
	return
}

func TestHealthyStays(t *testing.T) {
	s := newSim(map[uint32]string{1: "a", 2: "a"})
	if ej, _ := s.run(60); len(ej) != 0 {
		t.Errorf("ejected %v with every handshake answered", ej)
	}
}

func TestFailingEjected(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer float64
		eject  bool
	}{{"resets everything", 0, true}, {"answers 40%", 0.4, true}, {"answers 60%", 0.6, false}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(map[uint32]string{1: "a", 2: "a", 3: "a"})
			s.answer[2] = tc.answer
			ej, _ := s.run(40)
			_, got := ej[2]
			if got != tc.eject {
				t.Fatalf("ejected %v, want backend 2 ejected: %v", ej, tc.eject)
			}
			if len(ej) > 1 || (len(ej) == 1 && !got) {
				t.Errorf("a healthy backend was ejected: %v", ej)
			}
			// A verdict needs a whole window plus the timeout.
			if got && ej[2] < cfg.Window+cfg.Timeout {
				t.Errorf("ejected after %v, before a full window and timeout", ej[2])
			}
			if got && ej[2] > cfg.Window+cfg.Timeout+2*time.Second {
				t.Errorf("ejected after %v, want within a window and timeout (+2 s)", ej[2])
			}
		})
	}
}

func TestTooFewHandshakes(t *testing.T) {
	s := newSim(map[uint32]string{1: "a", 2: "a"})
	s.answer[2], s.rate[2] = 0, 0 // no traffic at all
	if ej, _ := s.run(40); len(ej) != 0 {
		t.Errorf("ejected %v without handshakes", ej)
	}
	// One unanswered handshake every other second: 5 per 10 s window,
	// under MinHandshakes.
	s = newSim(map[uint32]string{1: "a", 2: "a"})
	s.answer[2] = 0
	for i := 0; i < 40; i++ {
		s.rate[2] = uint64(i % 2)
		s.step()
	}
	if s.d.Ejected(2) {
		t.Error("ejected on 5 handshakes per window, fewer than MinHandshakes")
	}
}

func TestEjectedShareCapped(t *testing.T) {
	s := newSim(map[uint32]string{1: "a", 2: "a", 3: "a", 4: "a", 5: "b"})
	for ref := uint32(1); ref <= 5; ref++ {
		s.answer[ref] = 0
	}
	ej, _ := s.run(30)
	n := 0
	for ref := range ej {
		if ref <= 4 {
			n++
		}
	}
	if n != 2 {
		t.Errorf("VIP a: %d of 4 failing backends ejected, want 2 (50%%): %v", n, ej)
	}
	if _, ok := ej[5]; !ok {
		t.Errorf("VIP b's only backend, failing, was not ejected (one may always be): %v", ej)
	}
}

func TestReturnAndDoubling(t *testing.T) {
	s := newSim(map[uint32]string{1: "a", 2: "a"})
	s.answer[2] = 0
	s.up[2] = false
	ej, ret := s.run(60)
	if _, ok := ej[2]; !ok {
		t.Fatalf("not ejected: %v", ej)
	}
	if len(ret) != 0 {
		t.Fatalf("returned %v while its active check fails", ret)
	}
	// Fixed and checked up: it returns at once (its time is up).
	s.answer[2], s.up[2] = 1, true
	if _, ret = s.run(1); len(ret) != 1 {
		t.Fatalf("returned %v, want backend 2 back", ret)
	}
	// Failing again: ejected for twice as long.
	s.answer[2] = 0
	var first Change
	for i := 0; i < 40 && first.Ref == 0; i++ {
		for _, c := range s.step() {
			if c.Ejected {
				first = c
			}
		}
	}
	if first.Ref != 2 || first.For != 2*cfg.BaseEjection {
		t.Fatalf("second ejection %+v, want backend 2 for %v", first, 2*cfg.BaseEjection)
	}
	// It stays out for its time, even with its check up, and returns then.
	s.answer[2] = 1
	_, ret = s.run(int(2*cfg.BaseEjection/time.Second) + 1)
	if d, ok := ret[2]; !ok || d != 2*cfg.BaseEjection {
		t.Errorf("returned after %v (%v), want after %v", d, ok, 2*cfg.BaseEjection)
	}
}

func TestEjectionCapped(t *testing.T) {
	s := newSim(map[uint32]string{1: "a", 2: "a"})
	s.answer[2] = 0
	var lengths []time.Duration
	for round := 0; round < 4; round++ {
		for i := 0; i < 400; i++ {
			for _, c := range s.step() {
				if c.Ejected {
					lengths = append(lengths, c.For)
				}
			}
		}
	}
	if len(lengths) < 3 {
		t.Fatalf("ejections %v", lengths)
	}
	for _, l := range lengths {
		if l > cfg.MaxEjection {
			t.Errorf("ejection of %v, longer than MaxEjection", l)
		}
	}
	if lengths[len(lengths)-1] != cfg.MaxEjection {
		t.Errorf("ejections %v never reached the cap", lengths)
	}
}

func TestCountersReset(t *testing.T) {
	s := newSim(map[uint32]string{1: "a", 2: "a"})
	s.run(20)
	// A reload restarts the counters from 0: no verdict from the jump.
	*s.counts[2] = Counts{}
	if ej, _ := s.run(5); len(ej) != 0 {
		t.Errorf("ejected %v after a counter reset", ej)
	}
}

func TestForgetsUnobserved(t *testing.T) {
	s := newSim(map[uint32]string{1: "a", 2: "a"})
	s.answer[2] = 0
	s.run(20)
	if !s.d.Ejected(2) {
		t.Fatal("not ejected")
	}
	delete(s.counts, 2) // removed by a reload: no longer observed
	s.step()
	if s.d.Ejected(2) {
		t.Error("a backend no longer observed is still ejected")
	}
}
