package main

import (
	"strings"
	"testing"

	"github.com/vipd/vipd/control/admin/api"
)

// TestStats: vipd status -stats prints in and out per VIP and backend,
// like ipvsadm --stats, and "-" where vipd cannot see the replies (DSR),
// with a note saying why; no note without a DSR VIP.
func TestStats(t *testing.T) {
	u := func(n uint64) *uint64 { return &n }
	st := &api.State{VIPs: []api.VIPState{
		{Name: "web", Address: "198.18.0.100", Port: 80, Protocol: "tcp", Mode: "nat", NewFlows: 7, Packets: 30, OutPackets: u(25), Bytes: 3000, OutBytes: u(50000),
			Backends: []api.BackendState{{Address: "198.18.1.11", Port: 8080, NewFlows: 7, Packets: 30, OutPackets: u(25), Bytes: 3000, OutBytes: u(50000)}}},
		{Name: "dsr", Address: "198.18.0.101", Port: 80, Protocol: "tcp", Mode: "dsr", NewFlows: 2, Packets: 9, Bytes: 900,
			Backends: []api.BackendState{{Address: "198.18.1.21", NewFlows: 2, Packets: 9, Bytes: 900}}},
	}}
	var out strings.Builder
	if err := writeStats(&out, st); err != nil {
		t.Fatal(err)
	}
	fields := func(prefix string) []string {
		for _, l := range strings.Split(out.String(), "\n") {
			if f := strings.Fields(l); len(f) > 1 && (f[0] == prefix || f[1] == prefix) {
				return f
			}
		}
		t.Fatalf("no line for %s:\n%s", prefix, out.String())
		return nil
	}
	for _, tc := range []struct {
		key  string
		want []string
	}{
		{"198.18.0.100:80", []string{"TCP", "198.18.0.100:80", "7", "30", "25", "3000", "50000"}},
		{"198.18.1.11:8080", []string{"->", "198.18.1.11:8080", "7", "30", "25", "3000", "50000"}},
		{"198.18.0.101:80", []string{"TCP", "198.18.0.101:80", "2", "9", "-", "900", "-"}},
		{"198.18.1.21:80", []string{"->", "198.18.1.21:80", "2", "9", "-", "900", "-"}},
	} {
		if got := fields(tc.key); strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%s: %q, want %q", tc.key, got, tc.want)
		}
	}
	if !strings.Contains(out.String(), "vipd does not see the replies") {
		t.Errorf("no note on DSR:\n%s", out.String())
	}
	st.VIPs = st.VIPs[:1]
	out.Reset()
	if err := writeStats(&out, st); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "DSR") {
		t.Errorf("a note on DSR without a DSR VIP:\n%s", out.String())
	}
}
