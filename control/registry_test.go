package control

import (
	"fmt"
	"testing"
	"time"

	"github.com/vipd/vipd/control/config"
)

// fakeClock is a registry clock the test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func newHeldRegistry(hold time.Duration) (*Registry, *fakeClock) {
	c := &fakeClock{t: time.Unix(1e9, 0)}
	r := NewRegistry()
	r.now = c.now
	r.SetHold(hold)
	return r, c
}

// keep is the keep set of Forget.
func keep(keys ...string) map[string]bool {
	m := map[string]bool{}
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// TestRegistryRefReuse walks the reference life cycle: held after Forget,
// back to its own key at once, to another key only once the hold passed,
// under a new epoch.
func TestRegistryRefReuse(t *testing.T) {
	const hold = time.Minute
	type bind struct {
		key       string
		ref, ep   uint32
		afterHold bool // move the clock past the hold before binding
		forget    []string
	}
	tests := []struct {
		name  string
		steps []bind
	}{
		{"first sight", []bind{{key: "a", ref: 1, ep: 1}, {key: "b", ref: 2, ep: 1}}},
		{"kept key keeps its ref", []bind{{key: "a", ref: 1, ep: 1, forget: []string{"a"}}, {key: "a", ref: 1, ep: 1}}},
		{"re-added key gets its ref back", []bind{{key: "a", ref: 1, ep: 1, forget: []string{}}, {key: "a", ref: 1, ep: 1}}},
		{"another key waits for the hold", []bind{{key: "a", ref: 1, ep: 1, forget: []string{}}, {key: "b", ref: 2, ep: 1}}},
		{"another key after the hold, new epoch", []bind{{key: "a", ref: 1, ep: 1, forget: []string{}}, {key: "b", ref: 1, ep: 2, afterHold: true}}},
		{"oldest release first", []bind{
			{key: "a", ref: 1, ep: 1}, {key: "b", ref: 2, ep: 1, forget: []string{"b"}},
			{key: "c", ref: 3, ep: 1, forget: []string{"c"}},
			{key: "d", ref: 1, ep: 2, afterHold: true}, {key: "e", ref: 2, ep: 2}, {key: "f", ref: 4, ep: 1},
		}},
		{"a second release restarts the hold", []bind{
			{key: "a", ref: 1, ep: 1, forget: []string{}},
			{key: "a", ref: 1, ep: 1},
			{key: "x", ref: 2, ep: 1, forget: []string{"x"}},
			// a's first release has passed its hold, its second has not.
			{key: "b", ref: 3, ep: 1, afterHold: false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, c := newHeldRegistry(hold)
			for i, s := range tt.steps {
				if s.afterHold {
					c.t = c.t.Add(hold)
				}
				ref, ep := r.Bind(s.key)
				if ref != s.ref || ep != s.ep {
					t.Fatalf("step %d: Bind(%q) = %d epoch %d, want %d epoch %d", i, s.key, ref, ep, s.ref, s.ep)
				}
				if s.forget != nil {
					c.t = c.t.Add(time.Second)
					r.Forget(nil, keep(s.forget...))
				}
			}
		})
	}
	// The second release of "a" above: half a hold after it, a first
	// release a hold old must not hand the ref out.
	r, c := newHeldRegistry(hold)
	r.Bind("a")
	r.Forget(nil, keep())
	c.t = c.t.Add(hold / 2)
	r.Bind("a")
	r.Forget(nil, keep())
	c.t = c.t.Add(hold/2 + time.Second)
	if ref, _ := r.Bind("b"); ref == 1 {
		t.Errorf("a ref went to another key %v after its last release, hold %v", hold/2+time.Second, hold)
	}
	c.t = c.t.Add(hold / 2)
	if ref, ep := r.Bind("c"); ref != 1 || ep != 2 {
		t.Errorf("after the hold: ref %d epoch %d, want 1 epoch 2", ref, ep)
	}
}

// TestRegistryFlatUnderChurn: backends replaced by new ones at every
// reload, with reloads a minute apart, use at most the live backends plus
// those released within the hold.
func TestRegistryFlatUnderChurn(t *testing.T) {
	tests := []struct {
		name            string
		live, churn     int
		hold, interval  time.Duration
		reloads         int
		wantAtMostAfter int // refs handed out, a bound that does not grow with reloads
	}{
		{"all replaced", 100, 100, 15 * time.Minute, time.Minute, 1000, 100 * 17},
		{"one replaced", 100, 1, 15 * time.Minute, time.Minute, 1000, 100 + 17},
		{"re-added", 100, 0, 15 * time.Minute, time.Second, 1000, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, c := newHeldRegistry(tt.hold)
			gen := 0
			names := make([]string, tt.live)
			for i := range names {
				names[i] = fmt.Sprintf("b%d", i)
			}
			var atHalf int
			for n := 0; n < tt.reloads; n++ {
				for i := 0; i < tt.churn; i++ {
					gen++
					names[(n+i)%tt.live] = fmt.Sprintf("new%d", gen)
				}
				for _, k := range names {
					r.Bind(k)
				}
				r.Forget(nil, keep(names...))
				c.t = c.t.Add(tt.interval)
				if n == tt.reloads/2 {
					atHalf = r.Refs()
				}
			}
			if got := r.Refs(); got > tt.wantAtMostAfter || got != atHalf {
				t.Errorf("%d refs after %d reloads (%d at half way), want flat and at most %d", got, tt.reloads, atHalf, tt.wantAtMostAfter)
			}
		})
	}
}

func TestRefHold(t *testing.T) {
	tests := []struct {
		c    config.Conntrack
		want time.Duration
	}{
		{config.Conntrack{}, config.DefaultTCPEstablished + refHoldSlack},
		{config.Conntrack{TCPEstablished: config.Duration(time.Minute), UDP: config.Duration(2 * time.Hour)}, 2*time.Hour + refHoldSlack},
	}
	for _, tt := range tests {
		if got := RefHold(&tt.c); got != tt.want {
			t.Errorf("RefHold(%+v) = %v, want %v", tt.c, got, tt.want)
		}
	}
}
