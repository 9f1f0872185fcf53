package daemon

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vipd/vipd/admin"
)

// do makes a request and returns the status and body.
func do(t *testing.T, c *http.Client, method, url, ctype, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const drainBody = `{"vip": "web", "backend": "198.18.1.11:8080", "drain": true}`

// tcpClient talks to the TCP listener without keeping connections, so that
// a stopping server is not kept waiting.
var tcpClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}

// TestAdmin503UntilWorkersRun: while vipd opens its dataplane and while it
// waits for its first view of the host, both listeners exist but every
// endpoint answers 503, changes included; then 200. After the stop the
// socket file is gone.
func TestAdmin503UntilWorkersRun(t *testing.T) {
	td := newTestDaemon(t, testConfig, nil)
	sock := admin.SocketClient(td.socket)
	opened, release := make(chan struct{}), make(chan struct{})
	td.plat.onOpen = func() {
		close(opened)
		<-release
	}
	check := func(when string) {
		t.Helper()
		if err := td.d.Ready(); err == nil || !strings.Contains(err.Error(), "starting") {
			t.Errorf("%s: Ready() = %v", when, err)
		}
		base := "http://" + td.d.AdminAddr()
		for _, path := range []string{"/healthz", "/metrics", "/v1/state", "/v1/where?vip=web&client=198.18.0.1:1"} {
			if code, body := do(t, tcpClient, "GET", base+path, "", ""); code != http.StatusServiceUnavailable || !strings.Contains(body, "starting") {
				t.Errorf("%s: GET %s answered %d %q, want 503", when, path, code, body)
			}
		}
		if code, _ := do(t, sock, "GET", "http://vipd/healthz", "", ""); code != http.StatusServiceUnavailable {
			t.Errorf("%s: GET /healthz on the socket answered %d, want 503", when, code)
		}
		if code, _ := do(t, sock, "POST", "http://vipd/v1/drain", "application/json", drainBody); code != http.StatusServiceUnavailable {
			t.Errorf("%s: a drain on the socket answered %d, want 503", when, code)
		}
	}
	td.plat.onRun = func() { check("waiting for the host") }
	td.run()
	select {
	case <-opened:
	case err := <-td.done:
		t.Fatalf("Run: %v", err)
	}
	check("opening the dataplane")
	close(release)
	td.waitRunning()
	if code, _ := do(t, tcpClient, "GET", "http://"+td.d.AdminAddr()+"/healthz", "", ""); code != http.StatusOK {
		t.Errorf("/healthz answered %d once the workers run", code)
	}
	st, err := td.d.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.VIPs[0].Backends[0].Drained {
		t.Errorf("a drain sent before the workers ran was applied")
	}
	if err := td.stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(td.socket); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the admin socket outlived vipd: %v", err)
	}
}

// TestAdminSocketOnlyChanges: the socket has mode 0600 and serves the
// whole API; a change needs it and a JSON body. A POST on the TCP listener
// (which any web page can make a browser send) is refused whatever its
// body, and so is a POST on the socket that is not JSON.
func TestAdminSocketOnlyChanges(t *testing.T) {
	td := start(t, testConfig)
	fi, err := os.Lstat(td.socket)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("admin socket mode %v, want a socket with 0600", fi.Mode())
	}
	sock := admin.SocketClient(td.socket)
	tcp := "http://" + td.d.AdminAddr()
	drained := func() bool {
		st, err := td.d.State(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return st.VIPs[0].Backends[0].Drained
	}

	refused := []struct {
		name        string
		c           *http.Client
		url, ctype  string
		code        int
		bodyContent string
	}{
		{"TCP, JSON", tcpClient, tcp, "application/json", http.StatusForbidden, "admin socket"},
		{"TCP, form", tcpClient, tcp, "application/x-www-form-urlencoded", http.StatusForbidden, "read-only"},
		{"TCP, text", tcpClient, tcp, "text/plain", http.StatusForbidden, "read-only"},
		{"socket, form", sock, "http://vipd", "application/x-www-form-urlencoded", http.StatusUnsupportedMediaType, "application/json"},
		{"socket, text", sock, "http://vipd", "text/plain", http.StatusUnsupportedMediaType, "application/json"},
		{"socket, multipart", sock, "http://vipd", "multipart/form-data; boundary=x", http.StatusUnsupportedMediaType, "application/json"},
		{"socket, no type", sock, "http://vipd", "", http.StatusUnsupportedMediaType, "application/json"},
	}
	for _, r := range refused {
		code, body := do(t, r.c, "POST", r.url+"/v1/drain", r.ctype, drainBody)
		if code != r.code || !strings.Contains(body, r.bodyContent) {
			t.Errorf("%s: POST /v1/drain answered %d %q, want %d", r.name, code, body, r.code)
		}
		if drained() {
			t.Fatalf("%s: the refused drain was applied", r.name)
		}
	}
	// A CORS preflight is not granted.
	req, _ := http.NewRequest("OPTIONS", tcp+"/v1/drain", nil)
	req.Header.Set("Origin", "http://example.com")
	req.Header.Set("Access-Control-Request-Method", "POST")
	if resp, err := tcpClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
		if resp.StatusCode/100 == 2 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("a CORS preflight was answered %s %v", resp.Status, resp.Header)
		}
	}

	// The socket serves reads too, and JSON changes.
	if code, _ := do(t, sock, "GET", "http://vipd/v1/state", "", ""); code != http.StatusOK {
		t.Errorf("GET /v1/state on the socket answered %d", code)
	}
	if code, body := do(t, sock, "POST", "http://vipd/v1/drain", "application/json; charset=utf-8", drainBody); code != http.StatusOK {
		t.Errorf("a JSON drain on the socket answered %d %q", code, body)
	}
	if !drained() {
		t.Errorf("the drain on the socket was not applied")
	}
}

// TestAdminSocketStartStop: a socket left by a vipd that crashed is
// replaced; one somebody answers on, or a file that is not a socket, makes
// Run fail before it opens the dataplane; a missing directory is created.
func TestAdminSocketStartStop(t *testing.T) {
	t.Run("stale socket replaced", func(t *testing.T) {
		td := newTestDaemon(t, testConfig, nil)
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: td.socket, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		ln.SetUnlinkOnClose(false)
		ln.Close() // as a crash leaves it: the file, and nobody behind it
		td.run()
		td.waitRunning()
		if code, _ := do(t, admin.SocketClient(td.socket), "GET", "http://vipd/healthz", "", ""); code != http.StatusOK {
			t.Errorf("/healthz on the replaced socket answered %d", code)
		}
		if fi, err := os.Lstat(td.socket); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("replaced socket: %v %v", fi.Mode(), err)
		}
	})
	t.Run("socket in use", func(t *testing.T) {
		td := newTestDaemon(t, testConfig, nil)
		other, err := net.Listen("unix", td.socket)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		td.run()
		err = <-td.done
		td.cancel = nil
		if err == nil || !strings.Contains(err.Error(), "another vipd") {
			t.Errorf("Run with the socket in use: %v", err)
		}
		if len(td.plat.queues) != 0 {
			t.Errorf("the dataplane was opened although another vipd runs")
		}
		if c, err := net.Dial("unix", td.socket); err != nil {
			t.Errorf("the other vipd's socket was taken away: %v", err)
		} else {
			c.Close()
		}
	})
	t.Run("not a socket", func(t *testing.T) {
		td := newTestDaemon(t, testConfig, nil)
		if err := os.WriteFile(td.socket, []byte("precious"), 0o644); err != nil {
			t.Fatal(err)
		}
		td.run()
		err := <-td.done
		td.cancel = nil
		if err == nil || !strings.Contains(err.Error(), "not a socket") {
			t.Errorf("Run with a file at the socket path: %v", err)
		}
		if b, _ := os.ReadFile(td.socket); string(b) != "precious" {
			t.Errorf("the file at the socket path was changed")
		}
	})
	t.Run("directory created", func(t *testing.T) {
		td := newTestDaemon(t, strings.Replace(testConfig, "@SOCKET@", "@SOCKET@.d/run/admin.sock", 1), nil)
		path := td.socket + ".d/run/admin.sock"
		td.run()
		td.waitRunning()
		if fi, err := os.Lstat(path); err != nil || fi.Mode().Type() != fs.ModeSocket {
			t.Errorf("socket in a new directory: %v", err)
		}
		if fi, err := os.Stat(filepath.Dir(path)); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("the socket's new directory: %v %v", fi.Mode(), err)
		}
	})
}

// TestStateWalksThrottled: however many /v1/state requests come, at once or
// in a loop, the workers walk their flow tables at most once per flowsTTL
// (and once for all requests that wait for one walk); the counts still
// follow the flows.
func TestStateWalksThrottled(t *testing.T) {
	td := start(t, testConfig)
	for p := uint16(7000); p < 7010; p++ {
		td.send(syn(t, "198.18.0.100", p, "S"))
	}
	url := "http://" + td.d.AdminAddr() + "/v1/state"
	begin := time.Now()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				if code, body := do(t, tcpClient, "GET", url, "", ""); code != http.StatusOK {
					t.Errorf("GET /v1/state: %d %s", code, body)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(begin)
	td.d.mu.Lock()
	walks := td.d.flows.walked()
	td.d.mu.Unlock()
	if most := 1 + int(elapsed/flowsTTL); walks > most {
		t.Errorf("100 requests in %v made %d walks, want at most %d", elapsed, walks, most)
	}
	flows := func() int {
		st, err := td.d.State(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, b := range st.VIPs[0].Backends {
			n += b.ActiveFlows
		}
		return n
	}
	if n := flows(); n != 10 {
		t.Errorf("active flows %d, want 10", n)
	}
	for p := uint16(7100); p < 7105; p++ {
		td.send(syn(t, "198.18.0.100", p, "S"))
	}
	waitUntil(t, "the new flows counted", func() bool { return flows() == 15 })
}

// TestFlowCache drives the cache with a fake walk and a fake clock.
func TestFlowCache(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	release := make(chan struct{})
	var fail error
	walks := 0
	c := newFlowCache(context.Background(), func(ctx context.Context) (map[uint32]int, error) {
		mu.Lock()
		walks++
		n, err := walks, fail
		mu.Unlock()
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return map[uint32]int{1: n}, err
	}, time.Second)
	c.now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	advance := func(d time.Duration) {
		mu.Lock()
		now = now.Add(d)
		mu.Unlock()
	}

	// 20 callers while the walk runs, one of them giving up: one walk,
	// and the others get its result.
	results := make(chan int, 20)
	gaveUp, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 20 {
		ctx := context.Background()
		if i == 0 {
			ctx = gaveUp
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := c.get(ctx)
			if err != nil {
				if i != 0 {
					t.Errorf("get: %v", err)
				}
				return
			}
			results <- m[1]
		}()
	}
	waitUntil(t, "a walk", func() bool { return c.walked() == 1 })
	cancel()
	time.Sleep(10 * time.Millisecond)
	close(release) // from now on walks end at once
	wg.Wait()
	close(results)
	for n := range results {
		if n != 1 {
			t.Errorf("a caller got walk %d, want 1", n)
		}
	}
	get := func() int {
		m, err := c.get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return m[1]
	}
	advance(999 * time.Millisecond)
	if n := get(); n != 1 || c.walked() != 1 {
		t.Errorf("within the TTL: walk %d, %d walks", n, c.walked())
	}
	advance(time.Millisecond)
	if n := get(); n != 2 {
		t.Errorf("after the TTL: walk %d, want a new one", n)
	}
	// A failed walk is not reused.
	advance(time.Second)
	mu.Lock()
	fail = errors.New("worker stuck")
	mu.Unlock()
	if _, err := c.get(context.Background()); err == nil {
		t.Errorf("the failed walk's error was lost")
	}
	mu.Lock()
	fail = nil
	mu.Unlock()
	if n := get(); n != 4 {
		t.Errorf("after a failed walk: walk %d, want a new one (4)", n)
	}
}

// TestAdminPprof: /debug/pprof/ is served on the admin socket when
// [admin] pprof is on, and never on the TCP listener.
func TestAdminPprof(t *testing.T) {
	tests := []struct {
		name       string
		pprof      bool
		socketCode int
	}{
		{"off", false, http.StatusNotFound},
		{"on", true, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := testConfig
			if tt.pprof {
				src = strings.Replace(src, "socket = \"@SOCKET@\"\n", "socket = \"@SOCKET@\"\npprof = true\n", 1)
			}
			td := start(t, src)
			sock := admin.SocketClient(td.socket)
			for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1"} {
				if code, body := do(t, sock, "GET", "http://vipd"+path, "", ""); code != tt.socketCode || (code == 200 && !strings.Contains(body, "goroutine")) {
					t.Errorf("socket: GET %s answered %d, want %d", path, code, tt.socketCode)
				}
				if code, _ := do(t, tcpClient, "GET", "http://"+td.d.AdminAddr()+path, "", ""); code != http.StatusNotFound {
					t.Errorf("TCP: GET %s answered %d, want 404", path, code)
				}
			}
		})
	}
}
