package admin

import (
	"errors"
	"strings"
	"testing"
)

// TestWithPprof: the profiles are served only by a handler WithPprof made,
// also before the provider is ready, and the rest of the API is unchanged.
func TestWithPprof(t *testing.T) {
	ready, starting := &fakeProvider{}, &fakeProvider{ready: errors.New("vipd is starting")}
	tests := []struct {
		name     string
		p        *fakeProvider
		pprof    bool
		path     string
		code     int
		contains string
	}{
		{"off: index", ready, false, "/debug/pprof/", 404, ""},
		{"off: heap", ready, false, "/debug/pprof/heap", 404, ""},
		{"off: cmdline", ready, false, "/debug/pprof/cmdline", 404, ""},
		{"on: index", ready, true, "/debug/pprof/", 200, "goroutine"},
		{"on: goroutines", ready, true, "/debug/pprof/goroutine?debug=1", 200, "goroutine profile"},
		{"on: cmdline", ready, true, "/debug/pprof/cmdline", 200, ""},
		{"on: unknown profile", ready, true, "/debug/pprof/nosuch", 404, "Unknown profile"},
		{"on: the API still answers", ready, true, "/healthz", 200, "ok"},
		{"on, not ready: profiles answer", starting, true, "/debug/pprof/goroutine?debug=1", 200, "goroutine profile"},
		{"on, not ready: the API does not", starting, true, "/healthz", 503, "starting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := Handler(tt.p, Control)
			if tt.pprof {
				h = WithPprof(h)
			}
			code, body := serve(t, h, "GET", tt.path, "", "")
			if code != tt.code || !strings.Contains(body, tt.contains) {
				t.Errorf("GET %s answered %d %.80q, want %d with %q", tt.path, code, body, tt.code, tt.contains)
			}
		})
	}
}
