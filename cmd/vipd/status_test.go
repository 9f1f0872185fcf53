package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/control/admin/api"
)

// TestWriteStatusOverrides: vipd status marks an overridden backend and
// explains the mark once, under the table; without overrides, nothing.
func TestWriteStatusOverrides(t *testing.T) {
	w := uint32(5)
	st := &api.State{VIPs: []api.VIPState{{Name: "web", Address: "198.18.0.100", Port: 80, Protocol: "tcp", Mode: "nat", Backends: []api.BackendState{
		{Address: "198.18.1.11", Port: 8080, Weight: 1, Forwarding: "up", Override: &api.Override{Weight: &w}},
		{Address: "198.18.1.12", Port: 8080, Weight: 1, Forwarding: "down", Override: &api.Override{Disabled: true}},
		{Address: "198.18.1.13", Port: 8080, Weight: 1, Forwarding: "up"},
	}}}}
	var out strings.Builder
	if err := writeStatus(&out, st); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"up(weight 5*)", "down(disabled*)", "* 2 run-time overrides in force over the file", "vipd weight -reset"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("status lacks %q:\n%s", s, out.String())
		}
	}
	st.VIPs[0].Backends = st.VIPs[0].Backends[2:]
	out.Reset()
	writeStatus(&out, st)
	if strings.Contains(out.String(), "*") {
		t.Errorf("a mark without overrides:\n%s", out.String())
	}
}

// TestStatusShowsQUICLB: a QUIC-LB VIP's configurations show in vipd
// status, and a VIP with it off says so (the page: TestPageShowsQUICLB in
// admin).
func TestStatusShowsQUICLB(t *testing.T) {
	st := &api.State{VIPs: []api.VIPState{
		{Name: "quic", Address: "198.18.0.102", Port: 443, Protocol: "udp", Mode: "nat", FlowHash: "5tuple", TableSize: 65537,
			QUICLB: &api.QUICLBState{Enabled: true, Configs: []api.QUICLBConfigState{{Rotation: 0, ServerIDLen: 2, NonceLen: 6, Form: "plaintext"}, {Rotation: 1, ServerIDLen: 2, NonceLen: 6, Form: "three-pass"}}}},
		{Name: "quic-off", Address: "198.18.0.103", Port: 443, Protocol: "udp", Mode: "nat", FlowHash: "5tuple", TableSize: 65537,
			QUICLB: &api.QUICLBState{Configs: []api.QUICLBConfigState{{Rotation: 0, ServerIDLen: 2, NonceLen: 6, Form: "plaintext"}}}},
	}}
	var status strings.Builder
	if err := writeStatus(&status, st); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"quic-lb 0:plaintext,1:three-pass", "quic-lb off"} {
		if !strings.Contains(status.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, status.String())
		}
	}
}

// TestWriteStatus: the table shows a backend's address and port (the
// VIP's when it keeps the client's), its drain, its health with how long
// it has held and why it failed, and a VIP's previous set.
func TestWriteStatus(t *testing.T) {
	now := time.Now()
	st := &api.State{Version: "test", IO: "afxdp", Workers: 2, VIPs: []api.VIPState{
		{Name: "web", Address: "198.18.0.100", Port: 80, Protocol: "tcp", Mode: "nat", FlowHash: "5tuple", TableSize: 65537,
			Backends: []api.BackendState{
				{Address: "198.18.1.11", Port: 8080, Weight: 1, Health: "up", Forwarding: "draining", Drained: true},
				{Address: "198.18.1.12", Port: 8080, Weight: 1, Health: "down", Forwarding: "down", LastError: "HTTP 503", StateSince: now.Add(-3 * time.Second)},
			}},
		{Name: "dsr", Address: "198.18.0.101", Port: 80, Protocol: "tcp", Mode: "dsr", FlowHash: "5tuple", TableSize: 65537,
			PreviousUntil: time.Date(2026, 12, 4, 16, 0, 0, 0, time.UTC),
			Backends:      []api.BackendState{{Address: "198.18.1.13", Weight: 1, Health: "up", Forwarding: "up"}}},
	}}
	var out strings.Builder
	if err := writeStatus(&out, st); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"198.18.1.11:8080", "draining(drain)", "198.18.1.13:80", "previous-owner until 2026-12-04T16:00:00Z", "HTTP 503"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
	if !regexp.MustCompile(`down \d+s`).MatchString(out.String()) {
		t.Errorf("status shows no time down:\n%s", out.String())
	}
}

// TestStatusShowsFleet: the fleet's line (current, stale, from the cache,
// a refused revision, ignored keys) and the fleet's overrides with who
// and why; nothing of the fleet on a box without one.
func TestStatusShowsFleet(t *testing.T) {
	at := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	backends := []api.BackendState{
		{Address: "198.18.1.11", Port: 8080, Weight: 1, Forwarding: "draining", FleetOverride: &api.FleetOverride{What: "drain", By: "ops@lb1", Why: "kernel update", At: at}},
		{Address: "198.18.1.12", Port: 8080, Weight: 1, Forwarding: "up"},
	}
	for _, tc := range []struct {
		name  string
		fleet *api.FleetState
		want  []string
	}{
		{"none", nil, nil},
		{"current", &api.FleetState{Prefix: "/vipd/fleets/edge1/", Box: "lb1", Revision: 42, Connected: true},
			[]string{"fleet /vipd/fleets/edge1/ box lb1: revision 42, current\n"}},
		{"stale", &api.FleetState{Prefix: "/p/", Box: "lb1", Revision: 42, Stale: true, AgeSeconds: 65, EtcdError: "watching etcd: etcdserver: no leader",
			Refused: 43, RefusedWhy: "[dataplane] flow_hash_seed: 1 → 2: needs a restart", Ignored: []string{`override key "overrides/web/bad": ignored`}},
			[]string{"revision 42, STALE: etcd unreachable for 1m5s; the box forwards with this revision", "  etcd: watching etcd: etcdserver: no leader",
				"  revision 43 refused (the box keeps 42): [dataplane] flow_hash_seed", `  ignored: override key "overrides/web/bad"`}},
		{"from cache", &api.FleetState{Prefix: "/p/", Box: "lb1", Revision: 40, Stale: true, FromCache: true, CacheFile: "/var/lib/vipd/fleet.cache", AgeSeconds: 3600},
			[]string{"revision 40, STALE: started from its cache /var/lib/vipd/fleet.cache, etcd not reached since for 1h0m0s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &api.State{Fleet: tc.fleet, VIPs: []api.VIPState{{Name: "web", Address: "198.18.0.100", Port: 80, Protocol: "tcp", Mode: "nat", Backends: backends}}}
			var out strings.Builder
			if err := writeStatus(&out, st); err != nil {
				t.Fatal(err)
			}
			for _, s := range append(tc.want, "draining(fleet drain)", "fleet drain by ops@lb1 at 2026-12-06T08:00:00Z: kernel update") {
				if !strings.Contains(out.String(), s) {
					t.Errorf("status lacks %q:\n%s", s, out.String())
				}
			}
			if tc.fleet == nil && strings.Contains(out.String(), "fleet /") {
				t.Errorf("a fleet line without [fleet]:\n%s", out.String())
			}
		})
	}
}

// TestStatusShowsHandshakes: a backend's answered share and handshake
// times, and, for one that answers too few, why in the Why column even
// while its check passes; "-" for one without handshakes.
func TestStatusShowsHandshakes(t *testing.T) {
	st := &api.State{VIPs: []api.VIPState{{Name: "web", Address: "198.18.0.100", Port: 80, Protocol: "tcp", Mode: "nat", Backends: []api.BackendState{
		{Address: "198.18.1.11", Port: 8080, Weight: 1, Forwarding: "up", Health: "up", Handshakes: &api.HandshakeState{
			Tried: 120, Answered: 118, Share: 118.0 / 120, Timed: 118, P50Seconds: 0.0012, P99Seconds: 0.008}},
		{Address: "198.18.1.12", Port: 8080, Weight: 1, Forwarding: "up", Health: "up", Handshakes: &api.HandshakeState{
			Tried: 69, Share: 0, RecentTried: 69, Unanswered: "answered 0 of 69 handshakes in the last 10 s"}},
		{Address: "198.18.1.13", Port: 8080, Weight: 1, Forwarding: "up", Health: "up", Override: &api.Override{Disabled: true, Reason: "disk failing"}},
		{Address: "198.18.1.14", Port: 8080, Weight: 1, Forwarding: "draining", Health: "up", ActiveFlows: 1000, MaxFlows: 1000, AtMaxFlows: true},
	}}}}
	var out strings.Builder
	if err := writeStatus(&out, st); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	find := func(addr string) string {
		for _, l := range lines {
			if strings.Contains(l, addr) {
				return l
			}
		}
		t.Fatalf("no line for %s:\n%s", addr, out.String())
		return ""
	}
	for addr, want := range map[string][]string{
		"198.18.1.11": {"98% of 120", "1.2ms/8ms"},
		"198.18.1.12": {"0% of 69", "answered 0 of 69 handshakes in the last 10 s"},
		"198.18.1.13": {" - "},
		"198.18.1.14": {"at max_flows (1000 of 1000): no new flows until under 750"},
	} {
		l := find(addr)
		for _, w := range want {
			if !strings.Contains(l, w) {
				t.Errorf("%s: %q lacks %q", addr, l, w)
			}
		}
	}
	if strings.Contains(find("198.18.1.11"), "answered 0") {
		t.Error("a backend that answers is flagged")
	}
	if !strings.Contains(out.String(), "  web 198.18.1.13:8080: disk failing\n") {
		t.Errorf("the override's reason is not shown:\n%s", out.String())
	}
}
