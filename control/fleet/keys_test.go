package fleet

import (
	"slices"
	"strings"
	"testing"
)

func put(rev int64, key, value string) Event {
	return Event{Key: key, Value: []byte(value), Revision: rev}
}

func del(rev int64, key string) Event { return Event{Key: key, Delete: true, Revision: rev} }

// TestAdvance: one snapshot per revision that changed configuration, each
// whole (every event of its transaction), none for the boxes' own keys,
// and nothing applied twice when a watch resumes from an older revision.
func TestAdvance(t *testing.T) {
	k := &Keys{Revision: 10, Config: []byte("v1")}
	got := k.Advance([]Event{
		put(11, "config", "v2"),
		put(11, "overrides/web/198.18.1.11:8080", `{"drain":true}`), // one transaction with the config
		put(12, "boxes/box1", `{"revision":11}`),                    // a box's status: no snapshot
		put(13, "overrides/web/198.18.1.12:8080", `{"weight":5}`),
		put(13, "stray", "x"),
		del(14, "overrides/web/198.18.1.11:8080"),
	})
	type view struct {
		rev       int64
		config    string
		overrides []string
		ignored   []string
	}
	viewOf := func(k *Keys) view {
		var o []string
		for name, v := range k.Overrides {
			o = append(o, name+"="+string(v))
		}
		slices.Sort(o)
		return view{k.Revision, string(k.Config), o, k.Ignored}
	}
	want := []view{
		{11, "v2", []string{`web/198.18.1.11:8080={"drain":true}`}, nil},
		{13, "v2", []string{`web/198.18.1.11:8080={"drain":true}`, `web/198.18.1.12:8080={"weight":5}`}, []string{"stray"}},
		{14, "v2", []string{`web/198.18.1.12:8080={"weight":5}`}, []string{"stray"}},
	}
	if len(got) != len(want) {
		t.Fatalf("%d snapshots, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if g := viewOf(got[i]); !slices.Equal(g.overrides, want[i].overrides) || g.rev != want[i].rev || g.config != want[i].config || !slices.Equal(g.ignored, want[i].ignored) {
			t.Errorf("snapshot %d: %+v, want %+v", i, g, want[i])
		}
	}
	if k.Revision != 14 {
		t.Errorf("keys as of revision %d, want 14", k.Revision)
	}
	// Snapshots share nothing: a later change leaves an earlier one.
	if string(got[0].Config) != "v2" || len(got[0].Overrides) != 1 {
		t.Errorf("snapshot 11 changed under later events: %+v", viewOf(got[0]))
	}
	// A watch that resumes from revision 13 delivers 13 and 14 again.
	if again := k.Advance([]Event{put(13, "config", "old"), del(14, "config")}); len(again) != 0 || string(k.Config) != "v2" {
		t.Errorf("replayed events applied: %d snapshots, config %q", len(again), k.Config)
	}
	if more := k.Advance([]Event{del(15, "stray")}); len(more) != 1 || len(k.Ignored) != 0 {
		t.Errorf("deleting a stray key: %d snapshots, ignored %v", len(more), k.Ignored)
	}
}

func TestParseOverride(t *testing.T) {
	for _, tc := range []struct {
		name, key, value string
		want             string // error text; "" for none
		check            func(Override) bool
	}{
		{"drain", "web/198.18.1.11:8080", `{"drain":true,"by":"ops","why":"kernel","at":"2026-12-06T06:00:00Z"}`, "", func(o Override) bool {
			return o.Drain && o.VIP == "web" && o.Backend.String() == "198.18.1.11:8080" && o.By == "ops" && o.Why == "kernel" && !o.At.IsZero()
		}},
		{"weight", "web/[2001:2::11]:80", `{"weight":0}`, "", func(o Override) bool { return o.Weight != nil && *o.Weight == 0 && o.Backend.Addr().Is6() }},
		{"disabled", "web/198.18.1.11:8080", `{"disabled":true}`, "", func(o Override) bool { return o.Disabled }},
		{"no backend", "web", `{"drain":true}`, "want overrides/VIP/BACKEND", nil},
		{"backend not addr:port", "web/backend1", `{"drain":true}`, `backend "backend1" is not ADDR:PORT`, nil},
		{"not JSON", "web/198.18.1.11:8080", `drain`, "invalid character", nil},
		{"unknown field", "web/198.18.1.11:8080", `{"drain":true,"weigth":3}`, `unknown field "weigth"`, nil},
		{"two actions", "web/198.18.1.11:8080", `{"drain":true,"weight":3}`, "exactly one", nil},
		{"none", "web/198.18.1.11:8080", `{"by":"ops"}`, "exactly one", nil},
		{"drain false", "web/198.18.1.11:8080", `{"drain":false}`, "can only be true", nil},
		{"weight too big", "web/198.18.1.11:8080", `{"weight":1001}`, "over 1000", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := ParseOverride(tc.key, []byte(tc.value))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.want == "" && !tc.check(o):
				t.Errorf("parsed %+v", o)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "overrides/"+tc.key)):
				t.Errorf("error %v, want one naming overrides/%s and saying %q", err, tc.key, tc.want)
			}
		})
	}
}

// TestDigest: equal keys give equal digests whatever the map's order;
// any change to the document or an override changes it, and moving bytes
// between a key and its value does too.
func TestDigest(t *testing.T) {
	k := func(config string, o ...string) *Keys {
		m := map[string][]byte{}
		for i := 0; i+1 < len(o); i += 2 {
			m[o[i]] = []byte(o[i+1])
		}
		return &Keys{Config: []byte(config), Overrides: m}
	}
	base := k("seed", "a/1", "x", "b/2", "y").Digest()
	if again := k("seed", "b/2", "y", "a/1", "x").Digest(); again != base {
		t.Errorf("the same keys gave %s and %s", base, again)
	}
	for name, other := range map[string]*Keys{
		"document":      k("seed2", "a/1", "x", "b/2", "y"),
		"override":      k("seed", "a/1", "x", "b/2", "z"),
		"one fewer":     k("seed", "a/1", "x"),
		"key and value": k("seed", "a/1x", "", "b/2", "y"),
	} {
		if other.Digest() == base {
			t.Errorf("%s: the digest did not change", name)
		}
	}
}
