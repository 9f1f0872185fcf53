package daemon

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/dataplane"
	"github.com/vipd/vipd/testing/testkit"
)

// TestHandshakeVerdict: a backend's handshakes are judged a window after
// they begin; one that stops answering is flagged once at least
// blackHoleMin of the last 10 s went unanswered, and not before; one that
// never had a handshake has no state; a counter that goes back starts
// the history afresh.
func TestHandshakeVerdict(t *testing.T) {
	var h handshakes
	var c dataplane.FlowCounters
	const window = 3 * time.Second
	step := func(begun, answered uint64) {
		c.Handshakes += begun
		c.Answered += answered
		h.sample([]dataplane.FlowCounters{{}, c})
	}
	if st := h.state(0, window); st != nil {
		t.Fatalf("state of a backend without handshakes: %+v", st)
	}
	for range 70 { // healthy: 10 a second, each answered
		step(10, 10)
	}
	st := h.state(1, window)
	if st == nil || st.Tried != 600 || st.Answered != 600 || st.Share != 1 || st.Unanswered != "" {
		t.Fatalf("healthy: %+v", st)
	}
	if h.state(0, window) != nil {
		t.Error("ref 0, which never had a handshake, has a state")
	}
	// Black hole: the handshakes go on, the answers stop. Within the
	// window nothing is judged unanswered yet.
	for range 3 {
		step(10, 0)
	}
	st = h.state(1, window)
	if st.Unanswered != "" || st.RecentTried != 100 || st.RecentAnswered != 70 {
		t.Errorf("within the window: %+v", st)
	}
	for range 10 {
		step(10, 0)
	}
	st = h.state(1, window)
	if want := "answered 0 of 100 handshakes in the last 10 s"; st.Unanswered != want {
		t.Errorf("black hole: %q, want %q (%+v)", st.Unanswered, want, st)
	}
	if st.Tried != 600 || st.Answered != 470 || math.Abs(st.Share-470.0/600) > 1e-9 {
		t.Errorf("black hole, last minute: %+v", st)
	}
	if tried, answered, ok := h.recent(1, window); !ok || tried != 100 || answered != 0 {
		t.Errorf("recent: %d %d %v", tried, answered, ok)
	}
	// A ref whose counters went back (another backend now): afresh.
	c = dataplane.FlowCounters{Handshakes: 2}
	h.sample([]dataplane.FlowCounters{{}, c})
	if st := h.state(1, window); st.Tried != 0 || st.Unanswered != "" {
		t.Errorf("after a reset: %+v", st)
	}
	// Few handshakes are no verdict: one every 3 s, none answered.
	var q handshakes
	c = dataplane.FlowCounters{}
	for i := range 30 {
		if i%3 == 0 {
			c.Handshakes++
		}
		q.sample([]dataplane.FlowCounters{c})
	}
	if st := q.state(0, window); st.Unanswered != "" || st.RecentTried >= blackHoleMin || st.Share != 0 {
		t.Errorf("a handshake every 3 s: %+v", st)
	}
}

// TestHandshakeQuantiles: the median and 99th percentile of the last
// minute's histogram, interpolated in their buckets.
func TestHandshakeQuantiles(t *testing.T) {
	var counts [len(dataplane.HandshakeBuckets) + 1]uint64
	if quantile(counts[:], 0.5) != 0 {
		t.Error("empty histogram: not 0")
	}
	counts[1] = 100 // (0.5 ms, 1 ms]
	if got := quantile(counts[:], 0.5); math.Abs(got-0.00075) > 1e-9 {
		t.Errorf("p50 %v, want 0.00075", got)
	}
	counts[len(counts)-1] = 100 // over the last bound
	if got := quantile(counts[:], 0.99); got != 3 {
		t.Errorf("p99 %v, want 3 (the last bound)", got)
	}
	var h handshakes
	var c dataplane.FlowCounters
	for i := range 100 {
		c.Handshakes++
		c.Answered++
		c.HandshakeTime[2]++ // (1 ms, 2 ms]
		if i >= 90 {
			c.HandshakeTime[4]++ // and a slower one: (5 ms, 10 ms]
		}
		h.sample([]dataplane.FlowCounters{c})
	}
	st := h.state(0, time.Second)
	// The last minute, from the histogram kept 60 s ago: 60 samples of
	// the fast kind, 10 of the slow.
	if st.Timed != 70 || st.P50Seconds <= 0.001 || st.P50Seconds > 0.002 || st.P99Seconds <= 0.005 || st.P99Seconds > 0.01 {
		t.Errorf("%+v", st)
	}
}

// TestHistory: the sparklines' series are per-second averages over points
// of histStep seconds, oldest first, histPoints of them; the answered
// share is -1 where a point had no handshakes; a VIP or backend without
// traffic has no series.
func TestHistory(t *testing.T) {
	var h history
	var cur dataplane.Counters
	cur.VIPs = make([]dataplane.FlowCounters, 2)
	cur.Backends = make([]dataplane.FlowCounters, 3)
	step := func(in, tried, answered uint64) {
		old := cur
		old.VIPs = slices.Clone(cur.VIPs)
		old.Backends = slices.Clone(cur.Backends)
		cur.VIPs[1].Packets += in
		cur.Backends[2].Packets += in
		cur.Backends[2].NewFlows += tried
		cur.Backends[2].Handshakes += tried
		cur.Backends[2].Answered += answered
		h.add(&cur, &old)
	}
	for range 2 * histStep { // two points: 10 packets a second, all answered
		step(10, 2, 2)
	}
	for range histStep { // one point: none answered
		step(20, 4, 0)
	}
	for range histStep { // one point: no handshakes
		step(0, 0, 0)
	}
	if h.vips[0] != nil || h.backends[0] != nil || h.backends[1] != nil {
		t.Error("a series for a VIP or backend without traffic")
	}
	p := (h.tick - 1) / histStep
	s := h.backends[2].series(p)
	n := len(s.InPackets)
	if n != histPoints || s.StepSeconds != histStep {
		t.Fatalf("%d points of %v s", n, s.StepSeconds)
	}
	if got := s.InPackets[n-4:]; !slices.Equal(got, []float64{10, 10, 20, 0}) {
		t.Errorf("packets in per second %v, want 10 10 20 0", got)
	}
	if got := s.Answered[n-4:]; !slices.Equal(got, []float64{1, 1, 0, -1}) {
		t.Errorf("answered %v, want 1 1 0 -1", got)
	}
	if s.InPackets[0] != 0 || s.Answered[0] != -1 {
		t.Errorf("a point before the series began: %v %v", s.InPackets[0], s.Answered[0])
	}
	if v := h.vips[1].series(p); !slices.Equal(v.InPackets[n-4:], []float64{10, 10, 20, 0}) {
		t.Errorf("the VIP's %v", v.InPackets[n-4:])
	}
	// Six minutes later the old points are gone.
	for range histPoints * histStep {
		step(1, 0, 0)
	}
	s = h.backends[2].series((h.tick - 1) / histStep)
	for i, v := range s.InPackets {
		if v != 1 {
			t.Fatalf("point %d: %v, want 1 (the old points gone)", i, v)
		}
	}
}

// TestBlackHoleLog: a NAT VIP whose backends answer none of its clients'
// SYNs (this test's backends are not there) while their checks pass (no
// check) gets an ERROR naming the likely causes, once a minute while it
// lasts.
func TestBlackHoleLog(t *testing.T) {
	td := newTestDaemon(t, testConfig, nil)
	lb := td.logTo()
	td.run()
	td.waitRunning()
	const msg = "no backend of the VIP answers its clients' handshakes"
	port := uint16(1000)
	testkit.Eventually(t, testkit.Patience, "the ERROR", func() bool {
		// A few new SYNs a round, until blackHoleMin of them are judged.
		for range 3 {
			td.send(syn(t, "198.18.0.100", port, "S"))
			port++
		}
		return len(lb.lines(msg)) > 0
	})
	first := time.Now()
	lines := lb.lines(msg)
	if l := lines[0]; !strings.Contains(l, "level=ERROR") || !strings.Contains(l, "vip=web") || !strings.Contains(l, "come back through vipd") {
		t.Errorf("the ERROR: %s", l)
	}
	// Within the minute: not again; a minute on, while it lasts: again.
	td.d.blackHoleRound(first.Add(30 * time.Second))
	if n := len(lb.lines(msg)); n != 1 {
		t.Errorf("%d ERRORs within a minute, want 1", n)
	}
	td.d.blackHoleRound(first.Add(61 * time.Second))
	if n := len(lb.lines(msg)); n != 2 {
		t.Errorf("%d ERRORs a minute on, want 2", n)
	}
}
