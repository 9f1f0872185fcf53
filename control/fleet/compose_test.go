package fleet

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/vipd/vipd/control/config"
)

const composeLocal = `[dataplane]
ingress = "eth0"

[fleet]
endpoints = ["http://127.0.0.1:2379"]
prefix = "/vipd/fleets/edge1/"
`

const composeShared = `flow_hash_seed = 7

[[vip]]
name = "web"
address = "198.18.0.10"
port = 80
protocol = "tcp"

[[vip.backend]]
address = "198.18.1.11"
port = 8080

[[vip.backend]]
address = "198.18.1.12"
port = 8080

[[vip.backend]]
address = "198.18.1.13"
port = 8080
state = "disabled"
`

// TestCompose: the document and the overrides make one configuration;
// overrides that do not parse or name no backend are listed and left
// out, never an error; a document that does not validate is.
func TestCompose(t *testing.T) {
	local, _, err := config.Parse("vipd.toml", []byte(composeLocal))
	if err != nil {
		t.Fatal(err)
	}
	k := &Keys{Revision: 9, Config: []byte(composeShared), Overrides: map[string][]byte{
		"web/198.18.1.11:8080": []byte(`{"drain":true,"by":"ops","why":"kernel update"}`),
		"web/198.18.1.12:8080": []byte(`{"weight":7}`),
		"web/198.18.1.13:8080": []byte(`{"drain":true}`), // disabled in the document: stays disabled
		"web/198.18.1.99:8080": []byte(`{"drain":true}`), // no such backend
		"api/198.18.1.11:8080": []byte(`{"drain":true}`), // no such VIP
		"web/198.18.1.12:9":    []byte(`{"drain":true}`), // another port
		"web/bad":              []byte(`{"drain":true}`),
		"web/198.18.1.11:80":   []byte(`{"drain":false}`),
	}, Ignored: []string{"stray"}}
	c, err := Compose(local, k)
	if err != nil {
		t.Fatal(err)
	}
	if c.Config.Dataplane.FlowHashSeed != 7 || len(c.Config.VIPs) != 1 || c.Config.Dataplane.Ingress != "eth0" {
		t.Fatalf("composed: seed %d, %d VIPs, ingress %q", c.Config.Dataplane.FlowHashSeed, len(c.Config.VIPs), c.Config.Dataplane.Ingress)
	}
	bs := c.Config.VIPs[0].Backends
	type got struct {
		state  config.BackendState
		weight uint32
	}
	want := []got{{config.StateDraining, 1}, {config.StateActive, 7}, {config.StateDisabled, 1}}
	for i, w := range want {
		if g := (got{bs[i].State, bs[i].Weight}); g != w {
			t.Errorf("backend %s: %+v, want %+v", bs[i].Address, g, w)
		}
	}
	if len(c.Overrides) != 3 || c.Overrides[0].By != "ops" || c.Overrides[0].Why != "kernel update" || c.Overrides[0].What() != "drain" || c.Overrides[1].What() != "weight 7" {
		t.Errorf("overrides in force: %+v", c.Overrides)
	}
	for _, want := range []string{
		`"overrides/web/198.18.1.99:8080": VIP "web" has no backend 198.18.1.99:8080`,
		`"overrides/api/198.18.1.11:8080": VIP "api" has no backend`,
		`"overrides/web/198.18.1.12:9": VIP "web" has no backend 198.18.1.12:9`,
		`"overrides/web/bad": backend "bad" is not ADDR:PORT`,
		`"overrides/web/198.18.1.11:80": "drain" and "disabled" can only be true`,
		`key "stray" is none of the fleet's`,
	} {
		if !slices.ContainsFunc(c.Ignored, func(s string) bool { return strings.Contains(s, want) }) {
			t.Errorf("ignored %q, want one with %q", c.Ignored, want)
		}
	}
	if len(c.Ignored) != 6 {
		t.Errorf("%d ignored, want 6: %q", len(c.Ignored), c.Ignored)
	}

	// The keys are not changed by composing: another box composes the same.
	c2, err := Compose(local, k)
	if err != nil || c2.Config.VIPs[0].Backends[1].Weight != 7 {
		t.Fatalf("second compose: %v", err)
	}

	// A document that does not validate refuses the whole revision and
	// names where.
	bad := &Keys{Revision: 10, Config: []byte(strings.Replace(composeShared, `port = 80`, `port = 80000`, 1))}
	if _, err := Compose(local, bad); err == nil || !strings.Contains(err.Error(), "etcd /vipd/fleets/edge1/config@10") {
		t.Errorf("invalid document: %v", err)
	}
	if _, err := Compose(local, &Keys{Revision: 11}); !errors.Is(err, ErrNoConfig) {
		t.Errorf("no config key: %v", err)
	}
	if _, err := Compose(&config.Config{}, k); err == nil {
		t.Error("Compose without [fleet] succeeded")
	}
}

// TestComposer: a revision with the same document reuses its parse, and
// what one revision's overrides change never leaks into the next; a new
// document or a new local file parses again.
func TestComposer(t *testing.T) {
	local, _, err := config.Parse("vipd.toml", []byte(composeLocal))
	if err != nil {
		t.Fatal(err)
	}
	var cp Composer
	state := func(c *Composed) []config.BackendState {
		var out []config.BackendState
		for _, b := range c.Config.VIPs[0].Backends {
			out = append(out, b.State)
		}
		return out
	}
	drained := &Keys{Revision: 2, Config: []byte(composeShared), Overrides: map[string][]byte{"web/198.18.1.11:8080": []byte(`{"drain":true}`)}}
	c1, err := cp.Compose(local, drained)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := cp.Compose(local, &Keys{Revision: 3, Config: []byte(composeShared)})
	if err != nil {
		t.Fatal(err)
	}
	// Reused: what only a parse makes (the filled-in announce) is
	// shared; the backends, which overrides change, are not.
	if a1, a2 := c1.Config.VIPs[0].Announce, c2.Config.VIPs[0].Announce; a1 == nil || a1 != a2 {
		t.Error("the same document was parsed again")
	}
	if &c2.Config.VIPs[0].Backends[0] == &c1.Config.VIPs[0].Backends[0] {
		t.Error("two revisions share their backends")
	}
	want1 := []config.BackendState{config.StateDraining, config.StateActive, config.StateDisabled}
	want2 := []config.BackendState{config.StateActive, config.StateActive, config.StateDisabled}
	if !slices.Equal(state(c1), want1) || !slices.Equal(state(c2), want2) {
		t.Errorf("states %v then %v, want %v then %v", state(c1), state(c2), want1, want2)
	}
	if c1.Config.VIPs[0].Backends[0].State != config.StateDraining {
		t.Error("a later revision changed an earlier one's configuration")
	}
	// Drained, then weighted: the drain does not stay.
	c3, err := cp.Compose(local, &Keys{Revision: 4, Config: []byte(composeShared), Overrides: map[string][]byte{"web/198.18.1.12:8080": []byte(`{"weight":9}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []config.BackendState{config.StateActive, config.StateActive, config.StateDisabled}; !slices.Equal(state(c3), want) || c3.Config.VIPs[0].Backends[1].Weight != 9 {
		t.Errorf("states %v, weight %d", state(c3), c3.Config.VIPs[0].Backends[1].Weight)
	}
	c4, err := cp.Compose(local, drained)
	if err != nil || c4.Config.VIPs[0].Backends[1].Weight != 1 || !slices.Equal(state(c4), want1) {
		t.Errorf("the weight override outlived its key: %v", err)
	}
	seeded := &Keys{Revision: 5, Config: []byte(strings.Replace(composeShared, "flow_hash_seed = 7", "flow_hash_seed = 8", 1))}
	c5, err := cp.Compose(local, seeded)
	if err != nil || c5.Config.Dataplane.FlowHashSeed != 8 || c5.Config.VIPs[0].Announce == c4.Config.VIPs[0].Announce {
		t.Errorf("a new document not parsed: %v", err)
	}
	other, _, _ := config.Parse("vipd.toml", []byte(composeLocal))
	if c, err := cp.Compose(other, seeded); err != nil || c.Config.VIPs[0].Announce == c5.Config.VIPs[0].Announce {
		t.Errorf("a new local file not parsed: %v", err)
	}
	if _, err := cp.Compose(local, &Keys{Revision: 6}); !errors.Is(err, ErrNoConfig) {
		t.Errorf("no config key: %v", err)
	}
}
