package admin

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
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
