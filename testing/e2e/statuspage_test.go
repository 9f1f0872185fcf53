package e2e

import (
	"bytes"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/testing/nstest"
	"github.com/vipd/vipd/testing/testbed"
	"github.com/vipd/vipd/testing/testkit"
)

// updateScreenshot makes TestStatusPage write the page's screenshot to
// docs/status-page.png (README shows it):
//
//	sudo go test -count=1 -run '^TestStatusPage$' ./testing/e2e/ -update-screenshot
var updateScreenshot = flag.Bool("update-screenshot", false, "write docs/status-page.png from TestStatusPage")

// TestStatusPage: a real browser (headless Chromium) loads the status
// page from a running vipd, with one backend killed and one drained, and
// the DOM it renders shows each backend as the state says: the killed one
// down (row class, health and forwarding), the drained one draining, the
// others up.
func TestStatusPage(t *testing.T) {
	requireE2E(t)
	browser, lookErr := exec.LookPath("chromium")
	if lookErr != nil {
		t.Skip("chromium is not installed (make deps installs Debian's chromium as root): the status page needs a real browser")
	}
	e := setup(t, testbed.Options{}, testbed.ConfigOptions{Health: testbed.FastHealth})
	e.waitBackends("web-nat", "up")
	st := e.waitBackends("web-dsr", "up")
	// Some traffic, so the counters the page shows are not all 0.
	e.names(natURL, 30)
	e.names(dsrURL, 30)

	victim, drained := e.bed.Backends[1], e.bed.Backends[2]
	victim.Kill()
	if err := e.v.Drain("web-dsr", backendOf(t, st, "web-dsr", drained.Addr.String()), true); err != nil {
		t.Fatalf("drain: %v", err)
	}
	// want is what each backend of each VIP must show: the victim down
	// everywhere, the drained one draining on web-dsr, the rest up.
	want := func(vip, addr string) (health, forwarding string) {
		switch {
		case addr == victim.Addr.String():
			return "down", "down"
		case addr == drained.Addr.String() && vip == "web-dsr":
			return "up", "draining"
		}
		return "up", "up"
	}
	var err error
	if !testkit.Poll(patience, func() bool {
		if st, err = e.v.State(); err != nil {
			return false
		}
		for _, v := range st.VIPs {
			for _, b := range v.Backends {
				if h, f := want(v.Name, b.Address); b.Health != h || b.Forwarding != f {
					return false
				}
			}
		}
		return true
	}) {
		t.Fatalf("the backends never showed the killed one down and the drained one draining: %+v (%v)", st, err)
	}

	// The sparklines come with the rate sampler's first second: wait for
	// them on the page before the browser renders it.
	if !testkit.Poll(patience, func() bool {
		page, err := e.v.Page("/?refresh=0")
		return err == nil && strings.Count(page, `<div class="sparks"`) >= 2
	}) {
		t.Fatal("the page never showed the VIPs' sparklines")
	}
	dom := chromium(t, e.bed.Box, browser, "--dump-dom", "http://"+testbed.AdminAddr+"/")
	if !bytes.Contains(dom, []byte("<title>vipd ")) {
		t.Fatalf("chromium did not render the status page:\n%s", dom)
	}
	sections := map[string][]byte{}
	for _, m := range sectionRE.FindAllSubmatch(dom, -1) {
		sections[string(m[1])] = m[2]
	}
	for _, v := range st.VIPs {
		sec, ok := sections[v.Name]
		if !ok {
			t.Errorf("the page has no section for VIP %s", v.Name)
			continue
		}
		rows := map[string][][]byte{}
		for _, m := range rowRE.FindAllSubmatch(sec, -1) {
			rows[string(m[2])] = m
		}
		if len(rows) != len(v.Backends) {
			t.Errorf("VIP %s: the page shows %d backends, the state %d", v.Name, len(rows), len(v.Backends))
		}
		for _, b := range v.Backends {
			key := pageBackend(b)
			row, ok := rows[key]
			if !ok {
				t.Errorf("VIP %s: the page has no row for backend %s", v.Name, key)
				continue
			}
			health, fwd := want(v.Name, b.Address)
			if got := string(row[1]); got != fwd {
				t.Errorf("VIP %s backend %s: row class %q, want %q", v.Name, key, "backend "+got, "backend "+fwd)
			}
			if string(row[3]) != health || string(row[4]) != fwd {
				t.Errorf("VIP %s backend %s: health %s forwarding %s, want %s %s", v.Name, key, row[3], row[4], health, fwd)
			}
			if pill := fmt.Sprintf(`<span class="pill s-%s">%s</span>`, health, health); !bytes.Contains(row[5], []byte(pill)) {
				t.Errorf("VIP %s backend %s: the row does not show %s: %s", v.Name, key, health, row[5])
			}
			if health == "down" && (b.LastError == "" || !bytes.Contains(row[5], []byte(`<div class="err">`))) {
				t.Errorf("VIP %s backend %s: the row does not show why it is down (last_error %q): %s", v.Name, key, b.LastError, row[5])
			}
		}
	}
	// The last five minutes as sparklines (the clients' traffic above),
	// in and out per VIP (out "not seen" for DSR) and the events.
	for vip, want := range map[string][]string{
		"web-nat": {`class="sparks"`, `class="spark flows"`, `class="spark in"`, `class="spark out"`, `class="spark answered`, `<td class="sparkcell"><svg class="spark in"`, `<td class="n out">`},
		"web-dsr": {`class="sparks"`, `class="spark flows"`, `<td class="sparkcell"><svg class="spark in"`, `out: not seen (DSR)`, `<td class="n out muted"`},
	} {
		for _, w := range want {
			if !bytes.Contains(sections[vip], []byte(w)) {
				t.Errorf("VIP %s: the page lacks %s", vip, w)
			}
		}
	}
	if bytes.Contains(sections["web-dsr"], []byte(`class="spark out"`)) {
		t.Error("VIP web-dsr: a sparkline of replies vipd does not see")
	}
	for _, w := range []string{`<section class="events">`, `data-kind="drain"`, `data-kind="health"`, `data-kind="admin"`} {
		if !bytes.Contains(dom, []byte(w)) {
			t.Errorf("the page's events lack %s", w)
		}
	}
	if t.Failed() {
		t.Logf("the DOM chromium rendered:\n%s", dom)
	}

	if *updateScreenshot {
		out, err := filepath.Abs(filepath.Join("..", "..", "docs", "status-page.png"))
		if err != nil {
			t.Fatal(err)
		}
		os.Remove(out)
		chromium(t, e.bed.Box, browser, "--screenshot="+out, "--window-size=1600,660", "--hide-scrollbars",
			"http://"+testbed.AdminAddr+"/?refresh=0")
		if fi, err := os.Stat(out); err != nil || fi.Size() == 0 {
			t.Fatalf("chromium wrote no screenshot to %s: %v", out, err)
		}
		t.Logf("wrote %s", out)
	}
}

// sectionRE matches a VIP's section of the page: its name and content;
// rowRE a backend's row in it: forwarding class, backend, health,
// forwarding, and the row's cells.
var (
	sectionRE = regexp.MustCompile(`(?s)<section class="vip[^"]*" id="[^"]*" data-vip="([^"]+)">(.*?)</section>`)
	rowRE     = regexp.MustCompile(`(?s)<tr class="backend ([a-z]+)" data-backend="([^"]+)" data-health="([a-z]+)" data-forwarding="([a-z]+)">(.*?)</tr>`)
)

// pageBackend is how the page names a backend: addr:port, addr:* for
// port 0 (as vipd status does).
func pageBackend(b api.BackendState) string {
	if b.Port == 0 {
		return b.Address + ":*"
	}
	return net.JoinHostPort(b.Address, strconv.Itoa(int(b.Port)))
}

// backendOf returns the name vipd drain takes for the backend at addr of
// VIP vip in st.
func backendOf(t *testing.T, st *api.State, vip, addr string) string {
	t.Helper()
	for _, v := range st.VIPs {
		for _, b := range v.Backends {
			if v.Name == vip && b.Address == addr {
				if b.Port == 0 {
					return b.Address
				}
				return net.JoinHostPort(b.Address, strconv.Itoa(int(b.Port)))
			}
		}
	}
	t.Fatalf("VIP %s has no backend %s: %+v", vip, addr, st)
	return ""
}

// chromium runs headless Chromium inside ns (where vipd's admin listener
// is) with args, for at most a minute, and returns its standard output.
// Chromium as root needs --no-sandbox; its profile is a throwaway
// directory. It runs in a process group of its own, which is killed when
// it ends (its helper processes with it) or when it overruns.
func chromium(t *testing.T, ns *nstest.NS, browser string, args ...string) []byte {
	t.Helper()
	cmd := ns.Cmd(append([]string{browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
		"--user-data-dir=" + t.TempDir()}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	pgid := cmd.Process.Pid
	defer syscall.Kill(-pgid, syscall.SIGKILL)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("chromium %v: %v\n%s", args, err, tail(stderr.String(), 20))
		}
	case <-time.After(patience * 2):
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-done
		t.Fatalf("chromium %v did not finish in %v\n%s", args, patience*2, tail(stderr.String(), 20))
	}
	return stdout.Bytes()
}
