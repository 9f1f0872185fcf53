package admin

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/control/admin/api"
)

// stateProvider is a fakeProvider whose State is st.
type stateProvider struct {
	fakeProvider
	st *api.State
}

func (s *stateProvider) State(context.Context) (*api.State, error) { return s.st, nil }

var (
	overrideWeight uint32 = 5
	outPackets     uint64 = 7654321
	outBytes       uint64 = 5 << 20
)

// pageState is a VIP with one backend down, one up, one draining, and a
// BGP peer.
func pageState() *api.State {
	return &api.State{
		ConfigDiffers: true, ConfigError: "vipd.toml:3: <bad>",
		Role:    "standby",
		Version: "1.2.3", Generation: 7, IO: "afxdp", Workers: 2, FastPath: true,
		LoadedAt: time.Now().Add(-time.Minute),
		VIPs: []api.VIPState{{
			Name: "web", Address: "198.18.0.100", Port: 80, Protocol: "tcp", Mode: "nat",
			ActiveFlows: 17, Rates: api.Rates{PacketsPerSec: 1234, BytesPerSec: 2 << 20, NewFlowsPerSec: 3.5},
			FlowHash: "5tuple", TableSize: 65537, Packets: 1234567, Bytes: 3 << 20, NewFlows: 42, OutPackets: &outPackets, OutBytes: &outBytes,
			Announce: "withdrawn: all backends down",
			Backends: []api.BackendState{
				{Address: "198.18.1.11", Port: 8080, Weight: 1, MaglevWeight: 1, Config: "active", Health: "up", Forwarding: "up", SlowStart: 1, EffectiveWeight: 1, Load: 1, ActiveFlows: 3,
					OutPackets: &outPackets, OutBytes: &outBytes,
					Handshakes: &api.HandshakeState{Tried: 69, RecentTried: 69, Unanswered: "answered 0 of 69 handshakes in the last 10 s"}},
				{Address: "198.18.1.12", Port: 8080, Weight: 2, Config: "active", Health: "down", Forwarding: "down", SlowStart: 1, Load: 1,
					LastError: "dial tcp 198.18.1.12:8080: connection refused", StateSince: time.Now().Add(-90 * time.Second), LastCheckSeconds: 0.0012,
					Override: &api.Override{Weight: &overrideWeight, Since: time.Now()}},
				{Address: "198.18.1.13", Port: 8080, Weight: 1, Config: "draining", Health: "up", Drained: true, Forwarding: "draining", SlowStart: 1, Load: 1,
					Handshakes: &api.HandshakeState{Tried: 120, Answered: 119, Share: 119.0 / 120, Timed: 119, P50Seconds: 0.00125, P99Seconds: 0.0081}},
			},
		}},
		BGP: &api.BGPState{ASN: 65001, RouterID: "198.18.0.2", Box: api.BoxAnnouncing, Peers: []api.BGPPeerState{
			{Address: "198.18.0.1", ASN: 65000, State: "established", Since: time.Now().Add(-time.Hour)},
		}},
	}
}

// TestPage: GET / renders the state, a down backend as down (row class
// and data attributes), the others as what they are, and reloads itself.
func TestPage(t *testing.T) {
	sp := &stateProvider{st: pageState()}
	sp.events = []api.Event{
		{Seq: 1, Time: time.Now().Add(-time.Minute), Kind: api.EventHealth, VIP: "web", Backend: "198.18.1.12:8080", What: "up → down: connection refused"},
		{Seq: 2, Time: time.Now(), Kind: api.EventAdmin, VIP: "web", Backend: "198.18.1.12:8080", What: "POST /v1/override", By: "uid 0 pid 42 (vipd)", Reason: "<canary>"},
	}
	hist := func(in, answered float64) *api.History {
		h := &api.History{StepSeconds: 5}
		for range 60 {
			h.NewFlows, h.InPackets, h.OutPackets, h.Answered = append(h.NewFlows, 1), append(h.InPackets, in), append(h.OutPackets, in), append(h.Answered, answered)
		}
		return h
	}
	sp.hist = &api.Histories{VIPs: map[string]*api.History{"web": hist(100, 1)},
		Backends: map[string]*api.History{"web 198.18.1.11:8080": hist(50, 0), "web 198.18.1.13:8080": hist(50, -1)}}
	h := Handler(sp, ReadOnly)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	body := w.Body.String()
	if w.Code != 200 {
		t.Fatalf("GET / answered %d: %s", w.Code, body)
	}
	for k, want := range map[string]string{
		"Content-Type":            "text/html; charset=utf-8",
		"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
		"Cache-Control":           "no-store",
	} {
		if got := w.Header().Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	for _, want := range []string{
		`<meta http-equiv="refresh" content="2">`,
		`<tr class="backend up" data-backend="198.18.1.11:8080" data-health="up" data-forwarding="up">`,
		`<tr class="backend down" data-backend="198.18.1.12:8080" data-health="down" data-forwarding="down">`,
		`<tr class="backend draining" data-backend="198.18.1.13:8080" data-health="up" data-forwarding="draining">`,
		`<span class="pill s-down">down</span>`,
		`<span class="pill s-withdrawn" title="BGP">withdrawn: all backends down</span>`,
		`data-peer="198.18.0.1" data-state="established"`,
		`version <b>1.2.3</b>`,
		`generation <b>7</b>`,
		"in 1\u202f234\u202f567 pkts · 3.00 MiB · out 7\u202f654\u202f321 pkts · 5.00 MiB",
		`<td class="n out">7` + "\u202f654\u202f321</td><td class=\"n\">5.00 MiB</td>",
		// A backend whose replies vipd does not see (DSR) says so.
		`<td class="n out muted" title="DSR: the backend answers its clients directly">–</td>`,
		"198.18.0.100:80 tcp",
		"17 active flows · 1.23k pkt/s · 2.00 MiB/s · 3.50 new flows/s",
		`<div class="err">dial tcp 198.18.1.12:8080: connection refused</div>`,
		`title="the last check took 0.001 s">for 1m30s</small>`,
		`<span class="pill s-override"`, `>weight 5</span>`,
		`<div class="banner config-differs">`,
		`>standby</b>`,
		"the previous configuration still runs:\nvipd.toml:3: &lt;bad&gt;</div>",
		// A backend whose check passes but whose handshakes go
		// unanswered says so; one that answers shows its share and times.
		`<div class="err unanswered">answered 0 of 69 handshakes in the last 10 s</div>`,
		`<td class="n answered err">0% of 69</td>`,
		`<td class="n answered">99% of 120</td>`, `<td class="n">1.25ms / 8.1ms</td>`,
		// Sparklines: the VIP's four, each backend's two; a backend
		// that answers nothing in red, one without handshakes no line.
		`<div class="sparks" title="the last 5 minutes, points of 5 s"><svg class="spark flows" width="120" height="16"`,
		`<svg class="spark out"`,
		`<td class="sparkcell"><svg class="spark in" width="120" height="16" viewBox="0 0 120 16" role="img"><title>in: last 50, top 50</title><polyline points="0,1.0 2,1.0`,
		`<svg class="spark answered low" width="120" height="16" viewBox="0 0 120 16" role="img"><title>answered: last 0, top 1</title><polyline points="0,15.0`,
		`<title>answered: last none, top 1</title></svg></td>`,
		// The events, newest first, escaped.
		`<td>admin</td><td>web</td><td class="addr">198.18.1.12:8080</td><td>POST /v1/override</td><td>uid 0 pid 42 (vipd)</td><td>&lt;canary&gt;</td></tr>
<tr class="event" data-kind="health">`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(body, "<script") || regexp.MustCompile(`(src|href)="(https?:)?//`).MatchString(body) {
		t.Errorf("the page has a script or an external asset")
	}
}

// TestPageEscapes: every value from the state is escaped: a VIP named
// <script> shows as text, an attribute value cannot be closed.
func TestPageEscapes(t *testing.T) {
	st := pageState()
	st.VIPs[0].Name = `<script>alert("vip")</script>`
	st.VIPs[0].Backends[1].Address = `"><img src=x onerror=alert(1)>`
	st.BGP.Peers[0].LastError = `<b>bold</b>`
	_, body := serve(t, Handler(&stateProvider{st: st}, ReadOnly), "GET", "/", "", "")
	for _, bad := range []string{"<script", "<img", "<b>bold"} {
		if strings.Contains(body, bad) {
			t.Errorf("the page contains %q unescaped", bad)
		}
	}
	for _, want := range []string{"&lt;script&gt;alert(&#34;vip&#34;)&lt;/script&gt;", "&lt;b&gt;bold&lt;/b&gt;", `data-backend="&#34;&gt;&lt;img`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks the escaped %q", want)
		}
	}
}

// TestPageRoutes: ?refresh, 404 for other paths, 503 before ready, and
// WithPprof still serving its profiles beside the page.
func TestPageRoutes(t *testing.T) {
	p := &stateProvider{st: pageState()}
	starting := &stateProvider{fakeProvider: fakeProvider{ready: errors.New("vipd is starting")}, st: pageState()}
	tests := []struct {
		name         string
		h            http.Handler
		path         string
		code         int
		want, refuse string
	}{
		{"no refresh", Handler(p, ReadOnly), "/?refresh=0", 200, "reload by itself", "http-equiv"},
		{"refresh 10", Handler(p, ReadOnly), "/?refresh=10", 200, `content="10"`, ""},
		{"bad refresh", Handler(p, ReadOnly), "/?refresh=-1", 400, "0..3600", ""},
		{"unknown path", Handler(p, ReadOnly), "/index.html", 404, "", "<html"},
		{"control socket too", Handler(p, Control), "/", 200, "198.18.1.12:8080", ""},
		{"not ready", Handler(starting, ReadOnly), "/", 503, "starting", "<html"},
		{"pprof: the page", WithPprof(Handler(p, Control)), "/", 200, "198.18.1.12:8080", ""},
		{"pprof: the index", WithPprof(Handler(p, Control)), "/debug/pprof/", 200, "goroutine", "198.18.1.12"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := serve(t, tt.h, "GET", tt.path, "", "")
			if code != tt.code || !strings.Contains(body, tt.want) || (tt.refuse != "" && strings.Contains(body, tt.refuse)) {
				t.Errorf("GET %s answered %d %.200q, want %d with %q without %q", tt.path, code, body, tt.code, tt.want, tt.refuse)
			}
		})
	}
}

func TestGroupDigits(t *testing.T) {
	for n, want := range map[uint64]string{0: "0", 999: "999", 1000: "1\u202f000", 1234567: "1\u202f234\u202f567"} {
		if got := groupDigits(n); got != want {
			t.Errorf("groupDigits(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[uint64]string{0: "0 B", 1023: "1023 B", 1024: "1.00 KiB", 1536: "1.50 KiB", 100 << 20: "100 MiB", 15 << 30: "15.0 GiB", 3 << 50: "3072 TiB"} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestRate(t *testing.T) {
	for f, want := range map[float64]string{0: "0", 0.001: "0", 0.5: "0.50", 3: "3.00", 12.5: "12.5", 999: "999", 999.7: "1.00k", 1234: "1.23k", 45.6e6: "45.6M", 2e9: "2.00G", 5e12: "5000G"} {
		if got := rate(f); got != want {
			t.Errorf("rate(%v) = %q, want %q", f, got, want)
		}
	}
}

// TestPageShowsQUICLB: a QUIC-LB VIP's configurations show on the status
// page, and a VIP with it off says so (vipd status: TestStatusShowsQUICLB
// in cmd/vipd).
func TestPageShowsQUICLB(t *testing.T) {
	st := pageState()
	st.VIPs = append(st.VIPs,
		api.VIPState{Name: "quic", Address: "198.18.0.102", Port: 443, Protocol: "udp", Mode: "nat", FlowHash: "5tuple", TableSize: 65537,
			QUICLB: &api.QUICLBState{Enabled: true, Configs: []api.QUICLBConfigState{{Rotation: 0, ServerIDLen: 2, NonceLen: 6, Form: "plaintext"}, {Rotation: 1, ServerIDLen: 2, NonceLen: 6, Form: "three-pass"}}}},
		api.VIPState{Name: "quic-off", Address: "198.18.0.103", Port: 443, Protocol: "udp", Mode: "nat", FlowHash: "5tuple", TableSize: 65537,
			QUICLB: &api.QUICLBState{Configs: []api.QUICLBConfigState{{Rotation: 0, ServerIDLen: 2, NonceLen: 6, Form: "plaintext"}}}},
	)
	w := httptest.NewRecorder()
	Handler(&stateProvider{st: st}, ReadOnly).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	for _, want := range []string{"0:plaintext,1:three-pass", "QUIC-LB off"} {
		if !strings.Contains(w.Body.String(), want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// TestPageShowsFleet: a box of a fleet shows its revision, a banner when
// stale or when it refused a revision, and the fleet's overrides.
func TestPageShowsFleet(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fleet *api.FleetState
		want  []string
		not   []string
	}{
		{"none", nil, nil, []string{"fleet-current", "fleet-stale"}},
		{"current", &api.FleetState{Prefix: "/vipd/fleets/edge1/", Box: "lb1", Revision: 42, Connected: true},
			[]string{`<div class="banner ok fleet-current">Fleet /vipd/fleets/edge1/, box lb1: revision 42, current.</div>`}, []string{"fleet-stale", "fleet-refused"}},
		{"stale, refused", &api.FleetState{Prefix: "/p/", Box: "lb1", Revision: 42, Stale: true, AgeSeconds: 65, EtcdError: "etcdserver: no leader", Refused: 43, RefusedWhy: "flow_hash_seed <needs> a restart"},
			[]string{"this box runs revision 42 and cannot know it is the latest (etcd unreachable for 65 s). Traffic is not affected.", "<small>etcdserver: no leader</small>",
				"The fleet's revision 43 was refused here; revision 42 still runs:\nflow_hash_seed &lt;needs&gt; a restart</div>"}, []string{"fleet-current"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := pageState()
			st.Fleet = tc.fleet
			st.VIPs[0].Backends[0].FleetOverride = &api.FleetOverride{What: "drain", By: "ops@lb1", Why: "kernel update"}
			w := httptest.NewRecorder()
			Handler(&stateProvider{st: st}, ReadOnly).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
			body := w.Body.String()
			for _, s := range append(tc.want, `title="the fleet's override, by ops@lb1: kernel update">fleet drain</span>`) {
				if !strings.Contains(body, s) {
					t.Errorf("the page lacks %q", s)
				}
			}
			for _, s := range tc.not {
				if strings.Contains(body, s) {
					t.Errorf("the page has %q", s)
				}
			}
		})
	}
}
