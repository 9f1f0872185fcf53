package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/control/admin/api"
)

// fakeAdmin serves st as /v1/state and a fixed /v1/where answer; it
// returns the server's host:port.
func fakeAdmin(t *testing.T, st *api.State) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/state", func(w http.ResponseWriter, _ *http.Request) { json.NewEncoder(w).Encode(st) })
	mux.HandleFunc("/v1/where", func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(api.WhereAnswer{VIP: "web", Client: "198.18.0.100:1234", Backend: "198.18.1.11:8080", Note: "maglev"})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func sampleState() *api.State {
	since := time.Date(2026, 12, 4, 14, 0, 0, 0, time.UTC)
	return &api.State{
		Version: "test", IO: "afpacket", Workers: 2,
		VIPs: []api.VIPState{{Name: "web", Address: "198.18.0.10", Port: 80, Protocol: "tcp", Mode: "nat",
			Backends: []api.BackendState{{Address: "198.18.1.11", Port: 8080, Health: "down", Forwarding: "down",
				LastError: "connect: connection refused", StateSince: since, LastCheckSeconds: 0.0012}}}},
		BGP: &api.BGPState{ASN: 65001, RouterID: "198.18.0.1", Box: api.BoxAnnouncing,
			Peers: []api.BGPPeerState{{Address: "198.18.0.2", ASN: 65000, State: "established", Since: since}}},
	}
}

// TestStatusJSON: vipd status -json prints /v1/state, indented, and it
// decodes to what the server sent.
func TestStatusJSON(t *testing.T) {
	st := sampleState()
	addr := fakeAdmin(t, st)
	var out, errb bytes.Buffer
	if rc := run([]string{"status", "-json", "-admin", addr}, &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	if !strings.Contains(out.String(), "\n  \"version\": \"test\"") {
		t.Errorf("not indented JSON:\n%s", out.String())
	}
	var got api.State
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&got, st) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, *st)
	}
	out.Reset()
	if rc := run([]string{"status", "-admin", addr}, &out, &errb); rc != 0 || !strings.Contains(out.String(), "connect: connection refused") {
		t.Errorf("rc %d, status shows no error:\n%s", rc, out.String())
	}
}

func TestWhereJSON(t *testing.T) {
	addr := fakeAdmin(t, sampleState())
	var out, errb bytes.Buffer
	if rc := run([]string{"where", "-json", "-admin", addr, "web", "198.18.0.100:1234"}, &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	var a api.WhereAnswer
	if err := json.Unmarshal(out.Bytes(), &a); err != nil || a.Backend != "198.18.1.11:8080" {
		t.Errorf("%v %+v:\n%s", err, a, out.String())
	}
}

// TestPeers: vipd peers prints the sessions, as a table or JSON, and says
// so when there is no [bgp].
func TestPeers(t *testing.T) {
	st := sampleState()
	addr := fakeAdmin(t, st)
	var out, errb bytes.Buffer
	if rc := run([]string{"peers", "-admin", addr}, &out, &errb); rc != 0 || !strings.Contains(out.String(), "198.18.0.2") ||
		!strings.Contains(out.String(), "established") {
		t.Errorf("rc %d:\n%s%s", rc, out.String(), errb.String())
	}
	out.Reset()
	if rc := run([]string{"peers", "-json", "-admin", addr}, &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	var b api.BGPState
	if err := json.Unmarshal(out.Bytes(), &b); err != nil || len(b.Peers) != 1 || b.Peers[0].State != "established" {
		t.Errorf("%v %+v", err, b)
	}
	out.Reset()
	addr = fakeAdmin(t, &api.State{Version: "test"})
	if rc := run([]string{"peers", "-admin", addr}, &out, &errb); rc != 0 || !strings.Contains(out.String(), "no [bgp]") {
		t.Errorf("rc %d without bgp:\n%s", rc, out.String())
	}
}
