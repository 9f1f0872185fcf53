package admin

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// rawRequest sends head (request line and headers, without the blank line
// that ends them) on a new connection to addr, so that the Host header is
// exactly what the test wrote, or absent; it returns the status and body.
func rawRequest(t *testing.T, addr, head string) (int, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, head+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%q: %v", head, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// serveTCP serves h on a loopback port until the test ends.
func serveTCP(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// TestHostCheck: over a real TCP listener, a request is served only when
// its Host is an IP literal, localhost or an allowed name (any case, any
// port); every other one, a missing or empty Host included, is answered
// 421 naming [admin] allowed_hosts, and counted.
func TestHostCheck(t *testing.T) {
	hc := NewHostCheck([]string{"vipd.example.net", "Box.Example"}, nil)
	addr := serveTCP(t, hc.Wrap(Handler(&fakeProvider{}, ReadOnly, hc)))
	_, port, _ := net.SplitHostPort(addr)
	get := func(host string) string {
		return "GET /v1/state HTTP/1.1\r\nHost: " + host + "\r\nConnection: close"
	}
	tests := []struct {
		name string
		head string
		ok   bool
	}{
		{"IPv4 with port", get("127.0.0.1:" + port), true},
		{"IPv4", get("127.0.0.1"), true},
		{"another IPv4", get("198.18.0.1:" + port), true},
		{"IPv6 with port", get("[::1]:" + port), true},
		{"IPv6", get("[::1]"), true},
		{"IPv4-mapped IPv6", get("[::ffff:127.0.0.1]:" + port), true},
		{"localhost", get("localhost"), true},
		{"LOCALHOST with port", get("LOCALHOST:" + port), true},
		{"localhost, empty port", get("localhost:"), true},
		{"allowed name", get("vipd.example.net"), true},
		{"allowed name, other case, port", get("VIPD.Example.NET:" + port), true},
		{"allowed name, trailing dot", get("vipd.example.net.:" + port), true},
		{"allowed name listed in capitals", get("box.example:" + port), true},
		{"HTTP/1.0 with a Host", "GET /v1/state HTTP/1.0\r\nHost: 127.0.0.1:" + port, true},

		{"evil.example", get("evil.example"), false},
		{"evil.example with port", get("evil.example:" + port), false},
		{"rebinding name for 127.0.0.1", get("127.0.0.1.nip.io:" + port), false},
		{"localhost as a subdomain", get("localhost.evil.example"), false},
		{"allowed name as a prefix", get("vipd.example.net.evil.example"), false},
		{"parent of an allowed name", get("example.net"), false},
		{"empty Host", get(""), false},
		{"only a port", get(":" + port), false},
		{"HTTP/1.0 without Host", "GET /v1/state HTTP/1.0", false},
		{"IPv4 in brackets", get("[127.0.0.1]:" + port), false},
		{"IPv6 without brackets", get("::1"), false},
		{"port not a number", get("localhost:http"), false},
		{"unclosed bracket", get("[::1:" + port), false},
		{"absolute URI names the host", "GET http://evil.example/v1/state HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close", false},
		{"refused before the 404", "GET /nosuch HTTP/1.1\r\nHost: evil.example\r\nConnection: close", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := hc.Refused()
			code, body := rawRequest(t, addr, tt.head)
			refused := hc.Refused() - before
			if tt.ok {
				if code != http.StatusOK || !strings.Contains(body, `"version": "test"`) || refused != 0 {
					t.Errorf("answered %d %.100q, counted %d refused; want 200 with the state, none refused", code, body, refused)
				}
				return
			}
			if code != http.StatusMisdirectedRequest || !strings.Contains(body, "[admin] allowed_hosts") || refused != 1 {
				t.Errorf("answered %d %q, counted %d refused; want 421 naming [admin] allowed_hosts, one refused", code, body, refused)
			}
			if strings.Contains(body, "version") {
				t.Errorf("a refused request got the state: %.100q", body)
			}
		})
	}
	// The counter is on /metrics, for a request that is served.
	code, body := rawRequest(t, addr, "GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close")
	want := fmt.Sprintf("vipd_admin_requests_refused_total{reason=\"host\"} %d\n", hc.Refused())
	if code != http.StatusOK || !strings.Contains(body, want) {
		t.Errorf("/metrics answered %d without %q", code, want)
	}
}

// TestHostCheckBeforeReady: a refused Host gets 421 while vipd starts too,
// not the 503 that would tell a page vipd runs there.
func TestHostCheckBeforeReady(t *testing.T) {
	hc := NewHostCheck(nil, nil)
	p := &fakeProvider{ready: fmt.Errorf("vipd is starting")}
	addr := serveTCP(t, hc.Wrap(Handler(p, ReadOnly, hc)))
	if code, body := rawRequest(t, addr, "GET /healthz HTTP/1.1\r\nHost: evil.example\r\nConnection: close"); code != http.StatusMisdirectedRequest || strings.Contains(body, "starting") {
		t.Errorf("answered %d %q, want 421", code, body)
	}
	if code, _ := rawRequest(t, addr, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close"); code != http.StatusServiceUnavailable {
		t.Errorf("an IP literal got %d while starting, want 503", code)
	}
}

// records counts the log records it is handed, keeping the last one.
type records struct {
	mu   sync.Mutex
	n    int
	last slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	r.last = rec.Clone()
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

func (r *records) get() (int, map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	attrs := map[string]string{}
	r.last.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.String()
		return true
	})
	return r.n, attrs
}

// TestHostCheckLogRateLimited: refusals are logged at most once a minute,
// the next line saying how many went unlogged; all are counted.
func TestHostCheckLogRateLimited(t *testing.T) {
	var recs records
	hc := NewHostCheck(nil, slog.New(&recs))
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	hc.now = func() time.Time { return now }
	addr := serveTCP(t, hc.Wrap(Handler(&fakeProvider{}, ReadOnly, hc)))
	flood := func(n int) {
		for i := 0; i < n; i++ {
			rawRequest(t, addr, "GET /v1/state HTTP/1.1\r\nHost: evil.example\r\nConnection: close")
		}
	}
	steps := []struct {
		advance    time.Duration
		requests   int
		lines      int
		suppressed string
	}{
		{0, 20, 1, "0"},
		{59 * time.Second, 5, 1, "0"},
		{time.Second, 3, 2, "24"}, // 19 + 5 since the first line
		{30 * time.Second, 10, 2, "24"},
		{30 * time.Second, 1, 3, "12"},
	}
	total := 0
	for i, s := range steps {
		now = now.Add(s.advance)
		flood(s.requests)
		total += s.requests
		n, attrs := recs.get()
		if n != s.lines || attrs["suppressed"] != s.suppressed {
			t.Errorf("step %d: %d lines, the last with suppressed=%s; want %d, suppressed=%s", i, n, attrs["suppressed"], s.lines, s.suppressed)
		}
		if attrs["host"] != "evil.example" {
			t.Errorf("step %d: logged host %q", i, attrs["host"])
		}
	}
	if hc.Refused() != uint64(total) {
		t.Errorf("counted %d refused, want %d", hc.Refused(), total)
	}
}
