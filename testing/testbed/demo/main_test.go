package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/vipd/vipd/testing/testbed"
	"github.com/vipd/vipd/testing/testkit"
)

// childEnv set to 1 makes the test binary run the demo instead of the
// tests: TestDemo runs its own binary so, and reads what the demo prints.
const childEnv = "VIPD_DEMO_CHILD"

func TestMain(m *testing.M) { testkit.ChildMain(m, childEnv, main) }

// TestDemo runs make demo and checks the `vipd top -n 1` frame it prints:
// taken while requests stream to the example's NAT VIP and DSR VIP, it
// shows new flows, packets and bytes per second on both (the frame used
// to come after the stream and show zeros, so the README's sample could
// not be reproduced).
func TestDemo(t *testing.T) {
	out := testbed.RunDemo(t, childEnv)
	frame, ok := section(out, "$ vipd top -n 1")
	if !ok {
		t.Fatalf("no `vipd top -n 1` in the demo's output:\n%s", out)
	}
	rates := topRates(frame)
	for _, vip := range []string{"198.18.0.100:80", "198.18.0.101:80"} {
		r, ok := rates[vip]
		if !ok {
			t.Errorf("the top frame has no line for %s", vip)
			continue
		}
		for i, col := range []string{"ConnPS", "PktPS", "BytePS"} {
			if r[i] <= 0 {
				t.Errorf("the top frame shows %s %s = %v, taken while requests stream to it", vip, col, r[i])
			}
		}
	}
	if t.Failed() {
		t.Logf("the frame:\n%s", frame)
	}
}

// section returns the lines of out after the line that starts with head
// up to the next command or heading ("$ ", "== ").
func section(out, head string) (string, bool) {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, head) {
			continue
		}
		var s []string
		for _, l := range lines[i+1:] {
			if strings.HasPrefix(l, "$ ") || strings.HasPrefix(l, "== ") {
				break
			}
			s = append(s, l)
		}
		return strings.Join(s, "\n"), true
	}
	return "", false
}

// topRates reads the VIP lines of a vipd top frame (Prot, VIP:Port,
// ConnPS, PktPS, BytePS, ActiveFlows) into the three rates by VIP:Port;
// a rate that does not parse is -1.
func topRates(frame string) map[string][3]float64 {
	rates := map[string][3]float64{}
	for _, l := range strings.Split(frame, "\n") {
		// Prot VIP:Port ConnPS PktPS OutPktPS BytePS ActiveFlows
		f := strings.Fields(l)
		if len(f) != 7 || (f[0] != "TCP" && f[0] != "UDP") {
			continue
		}
		rates[f[1]] = [3]float64{parseRate(f[2]), parseRate(f[3]), parseRate(f[5])}
	}
	return rates
}

// parseRate reads a rate as vipd top prints it: 12, 345.6K, 1.2M, 3.0G.
func parseRate(s string) float64 {
	mult := 1.0
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'K':
			mult = 1e3
		case 'M':
			mult = 1e6
		case 'G':
			mult = 1e9
		}
		if mult != 1 {
			s = s[:n-1]
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return -1
	}
	return v * mult
}

// TestTopRates reads a frame as vipd top prints it (writeRates in
// cmd/vipd).
func TestTopRates(t *testing.T) {
	out := "$ vipd top -n 1\n" +
		"  Prot          VIP:Port  ConnPS  PktPS  OutPktPS  BytePS  ActiveFlows  Answered/1m  p50/p99\n" +
		"    ->      Backend:Port                                                                   \n" +
		"   TCP   198.18.0.100:80     649   6651      6000  525.0K        18455                          \n" +
		"    ->  198.18.1.11:8080     552   2863      2800  215.7K         9180  100% of 552  120µs/1ms\n" +
		"   UDP  198.18.0.102:443       0      0         0       0            0                          \n" +
		"\n== the connection table\n" +
		"   TCP   198.18.0.101:80       1      1         -       1            1\n"
	frame, ok := section(out, "$ vipd top -n 1")
	if !ok {
		t.Fatal("no section")
	}
	got := topRates(frame)
	want := map[string][3]float64{
		"198.18.0.100:80":  {649, 6651, 525000},
		"198.18.0.102:443": {0, 0, 0},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for vip, w := range want {
		if got[vip] != w {
			t.Errorf("%s: got %v, want %v", vip, got[vip], w)
		}
	}
	if r := parseRate("1.5M"); r != 1.5e6 {
		t.Errorf("parseRate(1.5M) = %v", r)
	}
	if r := parseRate("x"); r != -1 {
		t.Errorf("parseRate(x) = %v", r)
	}
}
