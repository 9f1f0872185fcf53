package admin

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipd/vipd/control/admin/api"
)

// TestConnContext: a request on a Unix socket carries its caller's uid,
// pid and command name, as the kernel says them (this test process is
// the caller); one on TCP carries none.
func TestConnContext(t *testing.T) {
	dir, err := os.MkdirTemp("", "vipd-peer")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	got := make(chan Caller, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := CallerOf(r.Context())
		if !ok {
			c = Caller{UID: -1}
		}
		got <- c
	})
	for _, tc := range []struct {
		network, addr string
		want          Caller
	}{
		{"unix", filepath.Join(dir, "s"), Caller{UID: os.Getuid(), PID: os.Getpid()}},
		{"tcp", "127.0.0.1:0", Caller{UID: -1}},
	} {
		ln, err := net.Listen(tc.network, tc.addr)
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: h, ConnContext: ConnContext}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, tc.network, ln.Addr().String())
		}}}
		resp, err := c.Get("http://vipd/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		c.CloseIdleConnections()
		g := <-got
		if g.UID != tc.want.UID || g.PID != tc.want.PID {
			t.Errorf("%s: caller %+v, want uid %d pid %d", tc.network, g, tc.want.UID, tc.want.PID)
		}
		if tc.network == "unix" && (g.Comm == "" || g.String() != Caller{UID: g.UID, PID: g.PID, Comm: g.Comm}.String()) {
			t.Errorf("unix: no command name in %+v", g)
		}
	}
}

// TestAudit: a change is logged with who made it, what it asked and the
// answer's status, and its handler still reads the whole body; a read is
// not logged.
func TestAudit(t *testing.T) {
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	var read string
	var recorded []api.Event
	h := Audit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		read = string(b)
		if r.URL.Path == "/v1/bad" {
			w.WriteHeader(http.StatusBadRequest)
		}
	}), log, func(e api.Event) { recorded = append(recorded, e) })
	ctx := context.WithValue(context.Background(), callerKey{}, Caller{UID: 0, PID: 42, Comm: "vipd"})
	body := `{"vip":"web","backend":"198.18.1.11","weight":5}`
	for _, tc := range []struct {
		method, path, body string
		want               []string // in the log line; nil: no line
	}{
		{"POST", "/v1/override", body, []string{`by="uid 0 pid 42 (vipd)"`, "method=POST", "path=/v1/override", `198.18.1.11`, "status=200"}},
		{"POST", "/v1/bad", "{}", []string{"path=/v1/bad", "status=400"}},
		{"GET", "/v1/state", "", nil},
	} {
		logged.Reset()
		r := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body)).WithContext(ctx)
		h.ServeHTTP(httptest.NewRecorder(), r)
		if read != tc.body {
			t.Errorf("%s %s: the handler read %q, want %q", tc.method, tc.path, read, tc.body)
		}
		line := logged.String()
		if tc.want == nil && line != "" {
			t.Errorf("%s %s logged %q", tc.method, tc.path, line)
		}
		for _, w := range tc.want {
			if !strings.Contains(line, w) {
				t.Errorf("%s %s: log %q lacks %q", tc.method, tc.path, line, w)
			}
		}
	}
	// The same as events: the changes, not the GET.
	if len(recorded) != 2 {
		t.Fatalf("events %+v, want the two changes", recorded)
	}
	if e := recorded[0]; e.Kind != api.EventAdmin || e.By != "uid 0 pid 42 (vipd)" || e.VIP != "web" || e.Backend != "198.18.1.11" ||
		!strings.Contains(e.What, "POST /v1/override") || !strings.Contains(e.What, "200 OK") {
		t.Errorf("the override's event: %+v", e)
	}
	if e := recorded[1]; !strings.Contains(e.What, "400 Bad Request") {
		t.Errorf("the refused change's event: %+v", e)
	}
}
