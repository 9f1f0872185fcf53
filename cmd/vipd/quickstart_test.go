package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/internal/linkwatch"
	"github.com/vipd/vipd/testing/nstest"
	"github.com/vipd/vipd/testing/testbed"
)

// readmePath is the repository's README, from this package's directory.
const readmePath = "../../README.md"

// quickStartHeading opens the README section whose TOML blocks are the
// quick start's configurations.
const quickStartHeading = "## Quick start"

// maxREADMELines keeps the README a front door; the rest lives in docs/.
const maxREADMELines = 400

// quickStartConfigs returns the ```toml blocks of the README's quick start
// section (from quickStartHeading to the next "## " heading), in order.
func quickStartConfigs(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		blocks     []string
		in, inTOML bool
		current    strings.Builder
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case inTOML:
			if strings.TrimSpace(line) == "```" {
				blocks = append(blocks, current.String())
				current.Reset()
				inTOML = false
				continue
			}
			current.WriteString(line)
			current.WriteByte('\n')
		case line == quickStartHeading:
			in = true
		case in && strings.HasPrefix(line, "## "):
			in = false
		case in && strings.TrimSpace(line) == "```toml":
			inTOML = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if inTOML {
		t.Fatalf("%s: a ```toml block of the quick start is not closed", readmePath)
	}
	return blocks
}

// TestQuickStartConfigs runs every configuration of the README's quick
// start through vipd -check, as a reader would, and requires it valid
// and free of warnings: a NAT VIP and a DSR VIP, at least. The host is
// left out (no local addresses, an egress link with an IPv4 address, a
// reverse-path filter that lets tunnel probes through), so that the
// result depends on the README alone.
func TestQuickStartConfigs(t *testing.T) {
	origAddrs, origLink, origRP := localAddrs, readLink, rpFilter
	t.Cleanup(func() { localAddrs, readLink, rpFilter = origAddrs, origLink, origRP })
	localAddrs = func() ([]netip.Addr, error) { return nil, nil }
	readLink = func(name string) (linkwatch.Link, error) {
		return linkwatch.Link{Name: name, Addrs: []netip.Prefix{netip.MustParsePrefix("198.18.1.1/24")}}, nil
	}
	rpFilter = func(string) error { return nil }

	blocks := quickStartConfigs(t)
	if len(blocks) < 2 {
		t.Fatalf("%s: %d ```toml blocks under %q, want the NAT and the DSR configuration", readmePath, len(blocks), quickStartHeading)
	}
	modes := map[string]bool{}
	for i, block := range blocks {
		path := filepath.Join(t.TempDir(), "quickstart.toml")
		if err := os.WriteFile(path, []byte(block), 0o644); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		if code := run([]string{"-check", "-config", path}, &stdout, &stderr); code != 0 {
			t.Errorf("quick start block %d: vipd -check exited %d:\n%s%s\n%s", i+1, code, &stdout, &stderr, block)
			continue
		}
		if stderr.Len() > 0 {
			t.Errorf("quick start block %d: vipd -check warns:\n%s\n%s", i+1, &stderr, block)
		}
		for _, m := range []string{"nat", "dsr"} {
			if strings.Contains(stdout.String(), "mode "+m) {
				modes[m] = true
			}
		}
	}
	for _, m := range []string{"nat", "dsr"} {
		if !modes[m] {
			t.Errorf("no quick start configuration has a VIP with mode %q", m)
		}
	}
}

// TestQuickStartForwards runs vipd on each quick start configuration in
// the test bed, whose layout is the quick start's (clients behind eth0,
// backends 198.18.1.11 and .12 behind eth1, the box at 198.18.1.1 on
// their side; NAT backends routed back through the box, DSR backends
// running vipd-decap), and requires every backend up and HTTP requests
// through the VIP answered by more than one backend. Only the admin
// socket and the state file move into the bed's directory, so that runs
// do not collide. Needs root; skipped with -short.
func TestQuickStartForwards(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the quick start end to end needs namespaces")
	}
	nstest.RequireRoot(t)
	bed := testbed.New(t, testbed.Options{})
	dir := t.TempDir()
	for i, block := range quickStartConfigs(t) {
		cfg := strings.Replace(block, "[dataplane]\n", fmt.Sprintf("[dataplane]\nstate_file = %q\n", filepath.Join(dir, fmt.Sprintf("state%d.json", i))), 1)
		cfg += fmt.Sprintf("\n[admin]\nlisten = %q\nsocket = %q\n", testbed.AdminAddr, bed.AdminSocket())
		v := bed.StartVIPD(cfg)
		var (
			mode string
			url  string
		)
		deadline := time.Now().Add(30 * time.Second)
		for {
			s, err := v.State()
			up := err == nil && len(s.VIPs) == 1
			if up {
				url = fmt.Sprintf("http://%s:%d/", s.VIPs[0].Address, s.VIPs[0].Port)
				mode = s.VIPs[0].Mode
				for _, b := range s.VIPs[0].Backends {
					up = up && b.Health == "up"
				}
			}
			if up {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("quick start block %d: backends not all up after 30 s (%v, %+v)\n%s", i+1, err, s, v.Log())
			}
			time.Sleep(100 * time.Millisecond)
		}
		c := bed.HTTPClient(10 * time.Second)
		answered := map[string]int{}
		for range 20 {
			body, err := testbed.Get(context.Background(), c, url)
			if err != nil {
				t.Fatalf("quick start block %d (%s): GET %s: %v\n%s", i+1, mode, url, err, v.Log())
			}
			answered[strings.TrimSpace(body)]++
		}
		if len(answered) < 2 {
			t.Errorf("quick start block %d (%s): 20 new connections to %s all reached one backend: %v", i+1, mode, url, answered)
		}
		t.Logf("quick start block %d (%s): %s answered by %v", i+1, mode, url, answered)
		if err := v.Stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestREADMELength keeps the README within maxREADMELines.
func TestREADMELength(t *testing.T) {
	b, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n > maxREADMELines {
		t.Errorf("%s has %d lines, at most %d: move the detail to docs/", readmePath, n, maxREADMELines)
	}
}
