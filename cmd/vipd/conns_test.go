package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/vipd/vipd/control/admin/api"
)

// TestConnsCommand runs vipd conns against a fake admin server: the VIP
// before or after the flags, the table and -json.
func TestConnsCommand(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.URL.RawQuery
		json.NewEncoder(w).Encode(api.Conns{Limit: 5, Conns: []api.Conn{{
			Protocol: "tcp", Client: "198.18.0.1:40000", VIP: "web", VIPAddress: "198.18.0.100:80",
			Backend: "198.18.1.11:8080", State: "Established", AgeSeconds: 75, IdleSeconds: 2, FastPath: "no",
		}}})
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct {
		args      []string
		wantQuery string
		wantOut   string
	}{
		{[]string{"conns", "-admin", addr}, "limit=1000", "198.18.1.11:8080  Established  1m15s  2s"},
		{[]string{"conns", "-admin", addr, "-limit", "5", "web", "-client", "198.18.0.1"}, "client=198.18.0.1&limit=5&vip=web", "(1 flows)"},
		{[]string{"conns", "-admin", addr, "-backend", "198.18.1.11", "-json"}, "backend=198.18.1.11&limit=1000", `"fast_path": "no"`},
	} {
		var out, errOut bytes.Buffer
		if code := run(tc.args, &out, &errOut); code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.args, code, errOut.String())
		}
		if got != tc.wantQuery {
			t.Errorf("%v: query %q, want %q", tc.args, got, tc.wantQuery)
		}
		if !strings.Contains(out.String(), tc.wantOut) {
			t.Errorf("%v: output lacks %q:\n%s", tc.args, tc.wantOut, out.String())
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"conns", "-admin", addr, "-limit", "0"}, &out, &errOut); code != 2 {
		t.Errorf("-limit 0: exit %d, want 2", code)
	}
}

// TestWriteConns: the table of vipd conns, one flow a line, and the
// note that the limit cut it.
func TestWriteConns(t *testing.T) {
	c := &api.Conns{Limit: 1, Truncated: true, Conns: []api.Conn{{
		Protocol: "tcp", Client: "198.18.0.1:40000", VIP: "web", VIPAddress: "198.18.1.1:80",
		Backend: "198.18.2.1:8080", State: "Established", AgeSeconds: 3600, IdleSeconds: 3, FastPath: "eligible",
	}, {
		Protocol: "udp", Client: "198.18.0.2:53", VIP: "dns", VIPAddress: "198.18.1.2:53",
		Backend: "198.18.2.2", State: "UDP", FastPath: "off", Previous: "198.18.2.9",
	}}}
	var buf bytes.Buffer
	if err := writeConns(&buf, c); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"PROTO", "tcp    198.18.0.1:40000  web 198.18.1.1:80  198.18.2.1:8080  Established  1h0m0s  3s",
		"eligible", "198.18.2.9", "limit; more match",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
