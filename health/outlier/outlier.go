package outlier

import (
	"sort"
	"time"
)

// Config is one VIP's detection policy.
type Config struct {
	Window            time.Duration // handshakes judged: those begun in the last Window before Timeout
	Timeout           time.Duration // how long a handshake may take to be answered
	MinHandshakes     uint64        // fewer in the window: no verdict
	Ratio             float64       // failure ratio (0, 1] at which a backend is ejected
	BaseEjection      time.Duration // the first ejection's length, doubled on each repeat
	MaxEjection       time.Duration // the longest ejection
	MaxEjectedPercent int           // at most this share of a VIP's backends ejected at once
}

// Counts are a backend's cumulative handshake counters.
type Counts struct {
	Handshakes uint64
	Answered   uint64
}

// Change is one ejection or return.
type Change struct {
	Ref     uint32
	VIP     string
	Ejected bool          // true: ejected now; false: returned
	Failed  uint64        // handshakes unanswered in the judged window (ejections)
	Tried   uint64        // handshakes in the judged window (ejections)
	For     time.Duration // the ejection's length (ejections)
}

// sample is a backend's counters at one tick.
type sample struct {
	at time.Time
	c  Counts
}

// backend is what the detector keeps per watched backend.
type backend struct {
	vip       string
	samples   []sample  // oldest first, at most Window + Timeout old (plus one before)
	until     time.Time // ejected until, zero when not ejected
	ejections int       // ejections so far, for the doubling
	seen      bool      // observed in the current round
}

// Detector holds the detection state of every watched backend.
type Detector struct {
	cfg      map[string]Config // by VIP
	backends map[uint32]*backend
}

// New returns an empty Detector.
func New() *Detector {
	return &Detector{cfg: map[string]Config{}, backends: map[uint32]*backend{}}
}

// SetConfig sets VIP vip's policy; Observe ignores backends of a VIP
// without one.
func (d *Detector) SetConfig(vip string, c Config) { d.cfg[vip] = c }

// Observe records backend ref's (of VIP vip) cumulative counters at now.
// Counters that went backwards (a reload restarted them) start the
// backend's history afresh.
func (d *Detector) Observe(now time.Time, vip string, ref uint32, c Counts) {
	cfg, ok := d.cfg[vip]
	if !ok {
		return
	}
	b := d.backends[ref]
	if b == nil || b.vip != vip {
		b = &backend{vip: vip}
		d.backends[ref] = b
	}
	b.seen = true
	if n := len(b.samples); n > 0 {
		last := b.samples[n-1].c
		if c.Handshakes < last.Handshakes || c.Answered < last.Answered {
			b.samples = b.samples[:0]
		}
	}
	b.samples = append(b.samples, sample{now, c})
	// Keep one sample at or before the oldest instant a verdict reads.
	horizon := now.Add(-cfg.Window - cfg.Timeout)
	drop := 0
	for drop+1 < len(b.samples) && !b.samples[drop+1].at.After(horizon) {
		drop++
	}
	b.samples = append(b.samples[:0], b.samples[drop:]...)
}

// at returns the last sample at or before t, and whether there is one.
func (b *backend) at(t time.Time) (Counts, bool) {
	i := sort.Search(len(b.samples), func(i int) bool { return b.samples[i].at.After(t) })
	if i == 0 {
		return Counts{}, false
	}
	return b.samples[i-1].c, true
}

// verdict returns the handshakes begun in [now-Timeout-Window,
// now-Timeout] and how many of them are unanswered by now. Answers are
// counted up to now, attributed to the window's handshakes first, so a
// backend is not failed for handshakes still within their Timeout.
func (b *backend) verdict(now time.Time, cfg Config) (tried, failed uint64, ok bool) {
	if len(b.samples) == 0 {
		return 0, 0, false
	}
	from, ok0 := b.at(now.Add(-cfg.Timeout - cfg.Window))
	to, ok1 := b.at(now.Add(-cfg.Timeout))
	if !ok0 || !ok1 {
		return 0, 0, false // not watched for a whole window yet
	}
	cur := b.samples[len(b.samples)-1].c
	tried = to.Handshakes - from.Handshakes
	answered := cur.Answered - from.Answered
	if answered >= tried {
		return tried, 0, true
	}
	return tried, tried - answered, true
}

// Evaluate judges every observed backend at now and returns the ejections
// and returns it decides; healthy reports whether a backend's active check
// passes (an ejected backend returns only then). Backends not observed
// since the last Evaluate are forgotten (a reload removed them).
func (d *Detector) Evaluate(now time.Time, healthy func(ref uint32) bool) []Change {
	var changes []Change
	watched, ejected := map[string]int{}, map[string]int{}
	for ref, b := range d.backends {
		if !b.seen {
			delete(d.backends, ref)
			continue
		}
		watched[b.vip]++
		if !b.until.IsZero() {
			if now.Before(b.until) || !healthy(ref) {
				ejected[b.vip]++
				continue
			}
			b.until = time.Time{}
			b.samples = b.samples[:0] // judged afresh from its return
			changes = append(changes, Change{Ref: ref, VIP: b.vip})
		}
	}
	// Candidates in a fixed order (by ref), so that the share cap picks
	// the same backends whatever the map's order.
	refs := make([]uint32, 0, len(d.backends))
	for ref := range d.backends {
		refs = append(refs, ref)
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i] < refs[j] })
	for _, ref := range refs {
		b := d.backends[ref]
		b.seen = false
		if !b.until.IsZero() {
			continue
		}
		cfg := d.cfg[b.vip]
		tried, failed, ok := b.verdict(now, cfg)
		if !ok || tried < cfg.MinHandshakes || tried == 0 || float64(failed) < cfg.Ratio*float64(tried) {
			continue
		}
		if limit := max(1, watched[b.vip]*cfg.MaxEjectedPercent/100); ejected[b.vip] >= limit {
			continue
		}
		length := cfg.BaseEjection << min(b.ejections, 16)
		if length > cfg.MaxEjection || length <= 0 {
			length = cfg.MaxEjection
		}
		b.ejections++
		b.until = now.Add(length)
		ejected[b.vip]++
		changes = append(changes, Change{Ref: ref, VIP: b.vip, Ejected: true, Failed: failed, Tried: tried, For: length})
	}
	return changes
}

// Ejected reports whether backend ref is ejected now.
func (d *Detector) Ejected(ref uint32) bool {
	b := d.backends[ref]
	return b != nil && !b.until.IsZero()
}
