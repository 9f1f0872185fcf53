package main

import (
	"bufio"
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipd/vipd/linkwatch"
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
