package daemon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/admin/client"
	"github.com/vipd/vipd/testing/testkit"
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
	sock := client.SocketClient(td.socket)
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
	sock := client.SocketClient(td.socket)
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
		if code, _ := do(t, client.SocketClient(td.socket), "GET", "http://vipd/healthz", "", ""); code != http.StatusOK {
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
	testkit.Eventually(t, testkit.Patience, "the new flows counted", func() bool { return flows() == 15 })
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
	testkit.Eventually(t, testkit.Patience, "a walk", func() bool { return c.walked() == 1 })
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
			sock := client.SocketClient(td.socket)
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

// rawGet sends a GET for path to addr with exactly the Host line given
// ("" sends an empty Host; noHost sends HTTP/1.0 without one) and returns
// the status and body.
func rawGet(t *testing.T, addr, path, host string, noHost bool) (int, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	head := "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n"
	if noHost {
		head = "GET " + path + " HTTP/1.0\r\n\r\n"
	}
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// refusedHosts reads vipd_admin_requests_refused_total{reason="host"} from
// the /metrics of c at base.
func refusedHosts(t *testing.T, c *http.Client, base string) string {
	t.Helper()
	code, body := do(t, c, "GET", base+"/metrics", "", "")
	m := regexp.MustCompile(`(?m)^vipd_admin_requests_refused_total\{reason="host"\} (\S+)$`).FindStringSubmatch(body)
	if code != http.StatusOK || m == nil {
		t.Fatalf("/metrics answered %d without vipd_admin_requests_refused_total{reason=\"host\"}", code)
	}
	return m[1]
}

// TestAdminHostCheck: the TCP listener serves a request only when its Host
// is an IP literal, localhost or in [admin] allowed_hosts; others, a
// DNS-rebinding page's name or no Host at all, get 421 naming the key and
// are counted. The Unix socket serves whatever the Host. A reload cannot
// change the list.
func TestAdminHostCheck(t *testing.T) {
	cfg := strings.Replace(testConfig, "listen = \"127.0.0.1:0\"\n", "listen = \"127.0.0.1:0\"\nallowed_hosts = [\"lb1.example.net\"]\n", 1)
	td := start(t, cfg)
	addr := td.d.AdminAddr()
	_, port, _ := net.SplitHostPort(addr)
	tests := []struct {
		name   string
		host   string
		noHost bool
		code   int
	}{
		{"IPv4 literal with port", "127.0.0.1:" + port, false, http.StatusOK},
		{"IPv6 literal with port", "[::1]:" + port, false, http.StatusOK},
		{"localhost", "localhost", false, http.StatusOK},
		{"LOCALHOST with port", "LOCALHOST:" + port, false, http.StatusOK},
		{"allowed name", "lb1.example.net:" + port, false, http.StatusOK},
		{"allowed name in capitals", "LB1.EXAMPLE.NET", false, http.StatusOK},
		{"evil.example", "evil.example", false, http.StatusMisdirectedRequest},
		{"evil.example with port", "evil.example:" + port, false, http.StatusMisdirectedRequest},
		{"rebinding name for 127.0.0.1", "127.0.0.1.nip.io:" + port, false, http.StatusMisdirectedRequest},
		{"empty Host", "", false, http.StatusMisdirectedRequest},
		{"HTTP/1.0 without Host", "", true, http.StatusMisdirectedRequest},
	}
	refused := 0
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := rawGet(t, addr, "/v1/state", tt.host, tt.noHost)
			if code != tt.code {
				t.Fatalf("answered %d %.100q, want %d", code, body, tt.code)
			}
			if code == http.StatusOK {
				if !strings.Contains(body, `"vips"`) {
					t.Errorf("answered 200 without the state: %.100q", body)
				}
				return
			}
			refused++
			if !strings.Contains(body, "[admin] allowed_hosts") || strings.Contains(body, "vips") {
				t.Errorf("the refusal %.200q does not name [admin] allowed_hosts, or carries the state", body)
			}
		})
	}
	// Both listeners report the count.
	if got := refusedHosts(t, tcpClient, "http://"+addr); got != strconv.Itoa(refused) {
		t.Errorf("the TCP listener's /metrics counts %s refused, want %d", got, refused)
	}
	sock := client.SocketClient(td.socket)
	if got := refusedHosts(t, sock, "http://vipd"); got != strconv.Itoa(refused) {
		t.Errorf("the socket's /metrics counts %s refused, want %d", got, refused)
	}

	// The socket checks no Host: `vipd drain` sends "vipd", and a
	// browser cannot reach a socket.
	for _, host := range []string{"vipd", "evil.example", ""} {
		req, _ := http.NewRequest("GET", "http://vipd/v1/state", nil)
		req.Host = host
		resp, err := sock.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("the socket answered %s for Host %q", resp.Status, host)
		}
	}
	if err := client.Drain(context.Background(), td.socket, "web", "198.18.1.11:8080", true, ""); err != nil {
		t.Errorf("a drain on the socket: %v", err)
	}

	// The list takes effect at start, like all of [admin].
	td.rewrite(strings.Replace(cfg, `"lb1.example.net"`, `"lb1.example.net", "lb2.example.net"`, 1))
	if err := td.d.Reload(); !errors.Is(err, ErrRestartNeeded) || !strings.Contains(err.Error(), "[admin]") {
		t.Errorf("a reload that changes allowed_hosts: %v, want [admin] needing a restart", err)
	}
	if code, _ := rawGet(t, addr, "/healthz", "lb2.example.net", false); code != http.StatusMisdirectedRequest {
		t.Errorf("a name added by a refused reload was served: %d", code)
	}
	td.rewrite(cfg)
	if err := td.d.Reload(); err != nil {
		t.Errorf("a reload with the same allowed_hosts: %v", err)
	}
}

// TestAdminChangeAudited: a change through the admin socket is logged
// with the caller the kernel names (this test process), what it asked
// and the answer; a read through it is not.
func TestAdminChangeAudited(t *testing.T) {
	td := newTestDaemon(t, testConfig, nil)
	lb := td.logTo()
	td.run()
	td.waitRunning()
	ctx := context.Background()
	w := uint32(5)
	if _, err := client.SetOverride(ctx, td.socket, api.OverrideRequest{VIP: "web", Backend: "198.18.1.11", Weight: &w}); err != nil {
		t.Fatal(err)
	}
	by := fmt.Sprintf(`by="uid %d pid %d (`, os.Getuid(), os.Getpid())
	lines := lb.lines("admin change", by, "path=/v1/override", "198.18.1.11", "status=200")
	if len(lines) != 1 {
		t.Errorf("%d audit lines for the override, want 1:\n%s", len(lines), lb.String())
	}
	if _, err := client.FetchSocketState(ctx, td.socket); err != nil {
		t.Fatal(err)
	}
	if n := len(lb.lines("admin change")); n != 1 {
		t.Errorf("%d audit lines after a read, want still 1", n)
	}
}
