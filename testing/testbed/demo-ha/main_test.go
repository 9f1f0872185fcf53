package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/vipd/vipd/testing/testbed"
	"github.com/vipd/vipd/testing/testkit"
)

// childEnv set to 1 makes the test binary run the demo instead of the
// tests: TestDemoHA runs its own binary so, and reads what the demo prints.
const childEnv = "VIPD_DEMO_HA_CHILD"

func TestMain(m *testing.M) { testkit.ChildMain(m, childEnv, main) }

// runDemo runs make demo-ha's program (testbed.RunDemo), which needs
// keepalived, and returns what it printed.
func runDemo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("keepalived"); err != nil {
		t.Skip("needs Debian's keepalived (make test-deps installs it)")
	}
	return testbed.RunDemo(t, childEnv)
}

// TestDemoHA runs make demo-ha and checks the status it prints of the box
// that took over (it used to be cut to a VIP the demo sends nothing to,
// and named the other box's file): the box its heading names runs on the
// file named for that box, is active, and the status is whole and shows
// the connections on the two echo VIPs the demo streams through.
func TestDemoHA(t *testing.T) {
	out := runDemo(t)
	checkStatus(t, out)
}

// checkStatus checks the status section of the demo's output out.
func checkStatus(t *testing.T, out string) {
	box, lines, ok := statusSection(out)
	if !ok {
		t.Fatalf("no `== vipd status on boxN` section in the demo's output:\n%s", out)
	}
	defer func() {
		if t.Failed() {
			t.Logf("the status section:\n%s", strings.Join(lines, "\n"))
		}
	}()
	if len(lines) < 4 {
		t.Fatalf("the status on box%s has %d lines", box, len(lines))
	}
	if f := configFile(lines[0]); filepath.Base(f) != "box"+box+".toml" {
		t.Errorf("the status is headed box%s, but its config file is %q", box, f)
	}
	if !strings.Contains(lines[1], "role active") {
		t.Errorf("box%s is not the active box: %q", box, lines[1])
	}
	vips, err := parseStatus(lines)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vips {
		if v.backends != 3 {
			t.Errorf("%s shows %d backends, want the bed's 3: the status is cut", v.addr, v.backends)
		}
	}
	for _, addr := range []string{"198.18.0.100:7", "198.18.0.101:7"} {
		var v *vipLines
		for i := range vips {
			if vips[i].addr == addr {
				v = &vips[i]
			}
		}
		switch {
		case v == nil:
			t.Errorf("the status has no lines for %s, which carries the demo's connections", addr)
		case v.active == 0 || v.packets == 0:
			t.Errorf("%s shows %d active flows and %d packets, taken while connections streamed through it", addr, v.active, v.packets)
		}
	}
}

var statusHead = regexp.MustCompile(`^== vipd status on box(\d+)\b`)

// statusSection returns the box number the status heading names and the
// lines vipd status printed below it (after the `$ vipd status` line, if
// any), up to a blank line or the next heading.
func statusSection(out string) (box string, lines []string, ok bool) {
	all := strings.Split(out, "\n")
	for i, l := range all {
		m := statusHead.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		for _, l := range all[i+1:] {
			if l == "" || strings.HasPrefix(l, "== ") {
				break
			}
			if !strings.HasPrefix(l, "$ ") {
				lines = append(lines, l)
			}
		}
		return m[1], lines, true
	}
	return "", nil, false
}

// configFile is the file named in vipd status's first line
// ("... config FILE (loaded ...) ...").
func configFile(line string) string {
	f := strings.Fields(line)
	for i := range f[:max(len(f)-1, 0)] {
		if f[i] == "config" {
			return f[i+1]
		}
	}
	return ""
}

// vipLines are a VIP's lines in vipd status: its backends, and their
// active flows and packets summed.
type vipLines struct {
	addr                      string
	backends, active, packets int
}

// parseStatus reads vipd status's table: VIP lines start with the
// protocol, backend lines with "->"; a backend's ActiveFlows and Packets
// are in the columns the header names (the table is aligned by
// tabwriter; the Health cell may hold a space).
func parseStatus(lines []string) ([]vipLines, error) {
	colActive, colPackets := -1, -1
	var vips []vipLines
	for _, l := range lines {
		f := strings.Fields(l)
		switch {
		case len(f) == 0:
		case f[0] == "->" && f[1] == "Backend:Port":
			colActive, colPackets = strings.Index(l, "ActiveFlows"), strings.Index(l, "InPkts")
		case f[0] == "TCP" || f[0] == "UDP":
			vips = append(vips, vipLines{addr: f[1]})
		case f[0] == "->" && len(vips) > 0 && colActive >= 0 && colPackets >= 0:
			v := &vips[len(vips)-1]
			v.backends++
			a, err := column(l, colActive)
			if err != nil {
				return nil, err
			}
			p, err := column(l, colPackets)
			if err != nil {
				return nil, err
			}
			v.active += a
			v.packets += p
		}
	}
	return vips, nil
}

// column is the number that starts at byte col of line.
func column(line string, col int) (int, error) {
	var f []string
	if col < len(line) {
		f = strings.Fields(line[col:])
	}
	if len(f) == 0 {
		return 0, fmt.Errorf("no number at column %d of %q", col, line)
	}
	return strconv.Atoi(f[0])
}

// TestParseStatus reads a status section as the demo prints it.
func TestParseStatus(t *testing.T) {
	out := "   broken: 0 of 100 DSR connections\n" +
		"\n== vipd status on box2, the active box\n" +
		"$ vipd status\n" +
		"vipd dev  io afxdp  workers 1  config /tmp/bed/box2.toml (loaded 2026-12-06T02:05:53Z)  snapshot 20\n" +
		"conntrack 200/65536 flows  XDP fast path off  role active\n" +
		"Prot  VIP:Port         Mode  Scheduler       Flags\n" +
		"  ->  Backend:Port     Weight  Forward  Health  ActiveFlows  InAct  NewFlows  InPkts  OutPkts  Answered/1m  p50/p99  Why\n" +
		"TCP   198.18.0.101:7   dsr   maglev M=65537  5tuple\n" +
		"  ->  198.18.1.11:7    1       up       up 7s   34           0      34        1792    -        100% of 34   1.2ms/3ms\n" +
		"  ->  198.18.1.12:7    1       up       down 1s 0            0      0         15      -        -            -        connect: connection refused\n" +
		"\nAll namespaces, links and processes removed.\n"
	box, lines, ok := statusSection(out)
	if !ok || box != "2" || len(lines) != 7 {
		t.Fatalf("statusSection: box %q, %d lines, %v", box, len(lines), ok)
	}
	if f := configFile(lines[0]); f != "/tmp/bed/box2.toml" {
		t.Errorf("configFile: %q", f)
	}
	vips, err := parseStatus(lines)
	if err != nil {
		t.Fatal(err)
	}
	want := []vipLines{{addr: "198.18.0.101:7", backends: 2, active: 34, packets: 1807}}
	if len(vips) != 1 || vips[0] != want[0] {
		t.Errorf("parseStatus: %+v, want %+v", vips, want)
	}
}
