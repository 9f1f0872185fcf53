package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/admin/client"
)

// fakeProvider records drains; ready is what Ready returns.
type fakeProvider struct {
	mu     sync.Mutex
	ready  error
	drains []api.DrainRequest
	events []api.Event
	hist   *api.Histories
}

func (f *fakeProvider) Histories() *api.Histories { return f.hist }

// Events serves f.events after seq, as the daemon's log does.
func (f *fakeProvider) Events(seq uint64, most int) *api.EventsAnswer {
	f.mu.Lock()
	defer f.mu.Unlock()
	ans := &api.EventsAnswer{Events: []api.Event{}}
	for _, e := range f.events {
		if e.Seq > seq {
			ans.Events = append(ans.Events, e)
		}
		ans.Last = max(ans.Last, e.Seq)
	}
	if most > 0 && len(ans.Events) > most {
		ans.Events = ans.Events[len(ans.Events)-most:]
	}
	return ans
}

func (f *fakeProvider) Ready() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ready
}

func (f *fakeProvider) State(context.Context) (*api.State, error) {
	return &api.State{Version: "test"}, nil
}
func (f *fakeProvider) Metrics() *Metrics { return &Metrics{} }
func (f *fakeProvider) Where(vip, client string, port uint16) (*api.WhereAnswer, error) {
	return &api.WhereAnswer{VIP: vip, Client: client, Backend: "198.18.1.11:8080"}, nil
}

func (f *fakeProvider) SetDrain(vip, backend string, drain bool, _ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if vip != "web" {
		return api.ErrNotFound
	}
	f.drains = append(f.drains, api.DrainRequest{VIP: vip, Backend: backend, Drain: &drain})
	return nil
}

func (f *fakeProvider) drained() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.drains)
}

func serve(t *testing.T, h http.Handler, method, path, ctype, body string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Code, w.Body.String()
}

const drainJSON = `{"vip": "web", "backend": "198.18.1.11:8080", "drain": true}`

func TestHandler(t *testing.T) {
	p := &fakeProvider{}
	ro, ctl := Handler(p, ReadOnly), Handler(p, Control)
	tests := []struct {
		name         string
		h            http.Handler
		method, path string
		ctype, body  string
		code         int
		want         string
	}{
		{"healthz", ro, "GET", "/healthz", "", "", 200, "ok"},
		{"state", ro, "GET", "/v1/state", "", "", 200, `"version": "test"`},
		{"where", ro, "GET", "/v1/where?vip=web&client=198.18.0.1:5", "", "", 200, "198.18.1.11:8080"},
		{"metrics", ro, "GET", "/metrics", "", "", 200, "vipd_snapshot_generation"},
		{"read-only refuses a JSON drain", ro, "POST", "/v1/drain", "application/json", drainJSON, 403, "admin socket"},
		{"read-only refuses a form drain", ro, "POST", "/v1/drain", "application/x-www-form-urlencoded", drainJSON, 403, "read-only"},
		{"read-only: GET drain", ro, "GET", "/v1/drain", "", "", 405, ""},
		{"control: text/plain", ctl, "POST", "/v1/drain", "text/plain", drainJSON, 415, "application/json"},
		{"control: form", ctl, "POST", "/v1/drain", "application/x-www-form-urlencoded", drainJSON, 415, "application/json"},
		{"control: no content type", ctl, "POST", "/v1/drain", "", drainJSON, 415, "application/json"},
		{"control: malformed content type", ctl, "POST", "/v1/drain", "application/json;;", drainJSON, 415, "application/json"},
		{"control: bad body", ctl, "POST", "/v1/drain", "application/json", `{"vip": "web"}`, 400, "want"},
		{"control: unknown VIP", ctl, "POST", "/v1/drain", "application/json", `{"vip": "x", "backend": "b", "drain": true}`, 404, "not found"},
		{"control: drain", ctl, "POST", "/v1/drain", "application/json; charset=utf-8", drainJSON, 200, "ok"},
		{"control: reads too", ctl, "GET", "/v1/state", "", "", 200, `"version"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := p.drained()
			code, body := serve(t, tt.h, tt.method, tt.path, tt.ctype, tt.body)
			if code != tt.code || !strings.Contains(body, tt.want) {
				t.Errorf("%s %s answered %d %q, want %d with %q", tt.method, tt.path, code, body, tt.code, tt.want)
			}
			if got := p.drained() - before; (tt.code == 200 && tt.path == "/v1/drain") != (got == 1) {
				t.Errorf("%d drains applied", got)
			}
		})
	}
}

// TestHandlerNotReady: until the provider is ready, everything is 503.
func TestHandlerNotReady(t *testing.T) {
	p := &fakeProvider{ready: errors.New("vipd is starting")}
	for _, access := range []Access{ReadOnly, Control} {
		h := Handler(p, access)
		for _, path := range []string{"/healthz", "/metrics", "/v1/state", "/v1/where?vip=web&client=198.18.0.1:5"} {
			if code, body := serve(t, h, "GET", path, "", ""); code != 503 || !strings.Contains(body, "starting") {
				t.Errorf("access %d: GET %s answered %d %q, want 503", access, path, code, body)
			}
		}
		if code, _ := serve(t, h, "POST", "/v1/drain", "application/json", drainJSON); code != 503 {
			t.Errorf("access %d: a drain answered %d, want 503", access, code)
		}
	}
	if p.drained() != 0 {
		t.Errorf("a drain was applied before the provider was ready")
	}
}

// TestDrainClient: Drain reaches a Control handler over a Unix socket, and
// explains why it cannot.
func TestDrainClient(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "admin.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	p := &fakeProvider{}
	srv := &http.Server{Handler: Handler(p, Control)}
	go srv.Serve(ln)
	defer srv.Close()
	ctx := context.Background()
	if err := client.Drain(ctx, path, "web", "198.18.1.11:8080", true, ""); err != nil {
		t.Fatalf("drain: %v", err)
	}
	if p.drained() != 1 || *p.drains[0].Drain != true || p.drains[0].Backend != "198.18.1.11:8080" {
		t.Errorf("drains %+v", p.drains)
	}
	if err := client.Drain(ctx, path, "nope", "198.18.1.11:8080", false, ""); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("drain of an unknown VIP: %v", err)
	}
	if err := client.Drain(ctx, filepath.Join(dir, "missing.sock"), "web", "b", true, ""); err == nil || !strings.Contains(err.Error(), "is vipd running") {
		t.Errorf("drain without a socket: %v", err)
	}
	stale := filepath.Join(dir, "stale.sock")
	sl, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	sl.SetUnlinkOnClose(false)
	sl.Close()
	if err := client.Drain(ctx, stale, "web", "b", true, ""); err == nil || !strings.Contains(err.Error(), "vipd is not running") {
		t.Errorf("drain on a stale socket: %v", err)
	}
	// Root cannot be refused by file permissions: the message is checked
	// on the error a non-root user gets.
	denied := &net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", syscall.EACCES)}
	if err := client.SocketError(path, denied); !strings.Contains(err.Error(), "permission denied") || !strings.Contains(err.Error(), "run this as root") {
		t.Errorf("permission error: %v", err)
	}
	if err := client.SocketError(path, io.ErrUnexpectedEOF); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("other errors are wrapped: %v", err)
	}
}

// TestEventsEndpoint: GET /v1/events answers the events after since, at
// most max, and the newest's number; a since or max that is no number is
// refused.
func TestEventsEndpoint(t *testing.T) {
	p := &fakeProvider{events: []api.Event{{Seq: 1, Kind: api.EventHealth}, {Seq: 2, Kind: api.EventDrain}, {Seq: 3, Kind: api.EventReload}}}
	h := Handler(p, ReadOnly)
	for _, tc := range []struct {
		query string
		code  int
		seqs  []uint64
	}{
		{"", 200, []uint64{1, 2, 3}},
		{"?since=1", 200, []uint64{2, 3}},
		{"?since=0&max=1", 200, []uint64{3}},
		{"?since=3", 200, nil},
		{"?since=x", 400, nil},
		{"?max=-1", 400, nil},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/v1/events"+tc.query, nil))
		if w.Code != tc.code {
			t.Errorf("%s: %d, want %d: %s", tc.query, w.Code, tc.code, w.Body)
			continue
		}
		if tc.code != 200 {
			continue
		}
		var ans api.EventsAnswer
		if err := json.Unmarshal(w.Body.Bytes(), &ans); err != nil {
			t.Fatal(err)
		}
		var seqs []uint64
		for _, e := range ans.Events {
			seqs = append(seqs, e.Seq)
		}
		if !slices.Equal(seqs, tc.seqs) || ans.Last != 3 {
			t.Errorf("%s: %v (last %d), want %v", tc.query, seqs, ans.Last, tc.seqs)
		}
	}
}
