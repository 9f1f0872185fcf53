package daemon

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/vipd/vipd/control"
	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/dataplane"
)

// The handshake verdict: what share of a backend's TCP handshakes were
// answered, over the last minute and the last 10 s, and how long they
// took. The workers count handshakes begun and answered per backend
// (dataplane/handshake.go); the rate sampler hands the sums here once a
// second, and each backend that ever had a handshake keeps its counts of
// the last two minutes per second. A handshake counts as unanswered when
// no answer came within its VIP's window ([vip.outlier] timeout, 3 s by
// default, whether or not ejection is on): the handshakes judged over a
// span are those begun in the span that ends one window ago, the answers
// those of the span itself. Answers later than the window count in the
// span they come in; the share is capped at 1 (NAT SYN-ACKs sent again
// count again).
const (
	hsSpan   = 60  // seconds: the last minute
	hsRecent = 10  // seconds: the Why column's span
	hsSlots  = 128 // per-second slots: hsSpan plus the longest window (1m), and room
	// A backend is flagged (the Why column, the log) when it answered
	// under blackHoleShare of at least blackHoleMin handshakes in the
	// last hsRecent seconds.
	blackHoleShare = 0.1
	blackHoleMin   = 5
	// hsHistEvery is how often (samples) a backend's time histogram is
	// kept, hsHists how many are: the quantiles span the last minute to
	// within hsHistEvery seconds.
	hsHistEvery = 10
	hsHists     = hsSpan/hsHistEvery + 1
)

// hsBackend is one backend's handshake history.
type hsBackend struct {
	// begun and answered are the counts of each second, slot tick%hsSlots.
	begun, answered [hsSlots]uint32
	// last is the cumulative counters at the last sample.
	lastBegun, lastAnswered uint64
	// hists are the cumulative time histograms every hsHistEvery ticks,
	// slot (tick/hsHistEvery)%hsHists, and lastHist the one of the
	// last sample.
	hists    [hsHists][len(dataplane.HandshakeBuckets) + 1]uint64
	lastHist [len(dataplane.HandshakeBuckets) + 1]uint64
	since    int64 // the tick it was first seen at
}

// handshakes is every backend's handshake history, by ref.
type handshakes struct {
	mu       sync.Mutex
	tick     int64 // samples taken
	backends map[uint32]*hsBackend
}

// sample takes the backends' cumulative counters (by ref) of one more
// second. A counter that went back (its ref now another backend's, or a
// worker replaced) starts that backend afresh.
func (h *handshakes) sample(bs []dataplane.FlowCounters) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tick++
	t := h.tick
	if h.backends == nil {
		h.backends = map[uint32]*hsBackend{}
	}
	for ref := range bs {
		f := &bs[ref]
		b := h.backends[uint32(ref)]
		if b == nil {
			if f.Handshakes == 0 && f.Answered == 0 {
				continue // never had one: nothing kept
			}
			b = &hsBackend{since: t}
			h.backends[uint32(ref)] = b
		}
		if f.Handshakes < b.lastBegun || f.Answered < b.lastAnswered {
			*b = hsBackend{since: t}
		}
		i := t % hsSlots
		b.begun[i] = uint32(min(f.Handshakes-b.lastBegun, math.MaxUint32))
		b.answered[i] = uint32(min(f.Answered-b.lastAnswered, math.MaxUint32))
		b.lastBegun, b.lastAnswered, b.lastHist = f.Handshakes, f.Answered, f.HandshakeTime
		if t%hsHistEvery == 0 {
			b.hists[(t/hsHistEvery)%hsHists] = f.HandshakeTime
		}
	}
	for ref := range h.backends {
		if int(ref) >= len(bs) {
			delete(h.backends, ref)
		}
	}
}

// countsLocked returns b's handshakes judged over the last span seconds with
// window w: those begun in the span that ended w ago, and the answers of
// the last span.
func (h *handshakes) countsLocked(b *hsBackend, span int64, w int64) (tried, answered uint64) {
	t := h.tick
	for s := t - span + 1; s <= t; s++ {
		if s > b.since {
			answered += uint64(b.answered[s%hsSlots])
		}
		if bs := s - w; bs > b.since {
			tried += uint64(b.begun[bs%hsSlots])
		}
	}
	return tried, answered
}

// state returns ref's handshake state for a VIP whose window is window;
// nil when the backend never had a handshake.
func (h *handshakes) state(ref uint32, window time.Duration) *api.HandshakeState {
	h.mu.Lock()
	defer h.mu.Unlock()
	b := h.backends[ref]
	if b == nil {
		return nil
	}
	w := int64(min(max((window+time.Second-1)/time.Second, 1), hsSlots-hsSpan-1))
	st := &api.HandshakeState{WindowSeconds: float64(w), Total: b.lastBegun, AnsweredTotal: b.lastAnswered}
	st.Tried, st.Answered = h.countsLocked(b, hsSpan, w)
	st.Share = share(st.Tried, st.Answered)
	st.RecentTried, st.RecentAnswered = h.countsLocked(b, hsRecent, w)
	if st.RecentTried >= blackHoleMin && share(st.RecentTried, st.RecentAnswered) < blackHoleShare {
		st.Unanswered = fmt.Sprintf("answered %d of %d handshakes in the last %d s", min(st.RecentAnswered, st.RecentTried), st.RecentTried, hsRecent)
	}
	// The time histogram of the last minute: now less the oldest kept
	// (or all of it, when the backend is younger than that).
	var base [len(dataplane.HandshakeBuckets) + 1]uint64
	if first := (h.tick/hsHistEvery - hsHists + 1) * hsHistEvery; first > b.since {
		base = b.hists[(first/hsHistEvery)%hsHists]
	}
	var d [len(base)]uint64
	for i := range d {
		d[i] = b.lastHist[i] - min(base[i], b.lastHist[i])
		st.Timed += d[i]
	}
	st.P50Seconds, st.P99Seconds = quantile(d[:], 0.5), quantile(d[:], 0.99)
	return st
}

// share is answered/tried capped at 1; 1 with none tried (nothing
// unanswered).
func share(tried, answered uint64) float64 {
	if tried == 0 {
		return 1
	}
	return min(float64(answered)/float64(tried), 1)
}

// quantile is the q-quantile in seconds of histogram counts (by
// dataplane.HandshakeBuckets, then +Inf), interpolated within its bucket
// as Prometheus's histogram_quantile does; the +Inf bucket's is the last
// bound. 0 for an empty histogram.
func quantile(counts []uint64, q float64) float64 {
	var n uint64
	for _, c := range counts {
		n += c
	}
	if n == 0 {
		return 0
	}
	rank := q * float64(n)
	var acc uint64
	lower := 0.0
	for i, c := range counts {
		if i == len(dataplane.HandshakeBuckets) {
			break
		}
		upper := float64(dataplane.HandshakeBuckets[i]) / 1e9
		if float64(acc+c) >= rank && c > 0 {
			return lower + (upper-lower)*(rank-float64(acc))/float64(c)
		}
		acc += c
		lower = upper
	}
	return float64(dataplane.HandshakeBuckets[len(dataplane.HandshakeBuckets)-1]) / 1e9
}

// recent returns ref's handshakes judged over the last hsRecent seconds
// with window window, and whether it has a history at all.
func (h *handshakes) recent(ref uint32, window time.Duration) (tried, answered uint64, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	b := h.backends[ref]
	if b == nil {
		return 0, 0, false
	}
	w := int64(min(max((window+time.Second-1)/time.Second, 1), hsSlots-hsSpan-1))
	tried, answered = h.countsLocked(b, hsRecent, w)
	return tried, answered, true
}

// blackHoleEvery is how often the ERROR about a VIP none of whose
// backends answers is repeated while it lasts.
const blackHoleEvery = time.Minute

// blackHoleRound logs an ERROR, at most once per blackHoleEvery per VIP,
// for each TCP VIP whose backends answered none of at least blackHoleMin
// handshakes in the last hsRecent seconds while the health checks of
// every backend that had them pass: the checks and the traffic disagree,
// and the likely causes are on the path, not in the backends. The same
// warnings vipd gives at start (checkOffload), as a live diagnosis.
func (d *Daemon) blackHoleRound(now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.phase != phaseRunning {
		return
	}
	if d.blackHoles == nil {
		d.blackHoles = map[string]time.Time{}
	}
	for i := range d.cfg.VIPs {
		v := &d.cfg.VIPs[i]
		if v.Protocol != config.TCP {
			continue
		}
		var tried, answered uint64
		checksPass := true
		for j := range v.Backends {
			ref := d.reg.Ref(control.BackendKey(v, &v.Backends[j]))
			t, a, ok := d.rates.hs.recent(ref, v.Outlier.Timeout.D())
			if !ok || t == 0 {
				continue
			}
			tried, answered = tried+t, answered+a
			if d.health[ref].Down {
				checksPass = false
			}
		}
		if tried < blackHoleMin || answered > 0 || !checksPass {
			delete(d.blackHoles, v.Name)
			continue
		}
		if last, ok := d.blackHoles[v.Name]; ok && now.Sub(last) < blackHoleEvery {
			continue
		}
		d.blackHoles[v.Name] = now
		d.log.Error("no backend of the VIP answers its clients' handshakes, while their health checks pass",
			"vip", v.Name, "mode", v.Mode, "handshakes", tried, "seconds", hsRecent, "likely", blackHoleCauses(v.Mode))
	}
}

// blackHoleCauses names what usually makes every handshake of a VIP go
// unanswered while its backends' checks pass (docs/operations.md,
// "Handshakes").
func blackHoleCauses(m config.Mode) string {
	if m == config.ModeDSR {
		return "the backends do not take the tunnel's packets (no decapsulation, the VIP not on their loopback, rp_filter) " +
			"or their replies to clients are dropped on the way; the tunnel's MTU"
	}
	return "the backends' replies do not come back through vipd (their route to clients must point at the box); " +
		"a firewall drops SYN-ACKs; checksums broken by TX checksum offload on a veth or tap (vipd -check-host); the path MTU"
}
