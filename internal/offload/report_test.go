package offload

import (
	"strings"
	"testing"
)

func TestWarning(t *testing.T) {
	veth := func(r Report) Report {
		r.Interface, r.IsVeth, r.PeerIndex = "eth0", true, 7
		return r
	}
	cases := []struct {
		name string
		r    Report
		fix  string   // FixCommand
		want []string // in Warning; none: Warning is ""
	}{
		{"not a veth", Report{Interface: "eth0", PeerNetNSID: -1}, "", nil},
		{"same namespace, off", veth(Report{PeerNetNSID: -1, PeerReachable: true, PeerName: "v1"}), "ethtool -K v1 tx off", nil},
		{"same namespace, on", veth(Report{PeerNetNSID: -1, PeerReachable: true, PeerName: "v1", PeerTxChecksum: true}),
			"ethtool -K v1 tx off", []string{"eth0", "v1", "in this namespace", "fix: ethtool -K v1 tx off"}},
		{"named namespace, on", veth(Report{PeerNetNSID: 3, PeerNetNS: "ctr", PeerReachable: true, PeerName: "eth0", PeerTxChecksum: true}),
			"ip netns exec ctr ethtool -K eth0 tx off", []string{"in netns ctr", "fix: ip netns exec ctr ethtool -K eth0 tx off"}},
		{"named namespace, off", veth(Report{PeerNetNSID: 3, PeerNetNS: "ctr", PeerReachable: true, PeerName: "eth0"}),
			"ip netns exec ctr ethtool -K eth0 tx off", nil},
		{"process's namespace, on", veth(Report{PeerNetNSID: 0, PeerNetNS: "/proc/42/ns/net", PeerReachable: true, PeerName: "eth0", PeerTxChecksum: true}),
			"nsenter --net=/proc/42/ns/net ethtool -K eth0 tx off", []string{"fix: nsenter --net=/proc/42/ns/net ethtool -K eth0 tx off"}},
		{"unreachable", veth(Report{PeerNetNSID: 5, Unreachable: "no way in"}),
			"", []string{"ifindex 7", "netns id 5", "(no way in)", "ethtool -K PEER tx off"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.r.FixCommand(); got != tc.fix {
				t.Errorf("FixCommand() = %q, want %q", got, tc.fix)
			}
			w := tc.r.Warning()
			if tc.want == nil {
				if w != "" || !tc.r.OK() {
					t.Errorf("OK() = %v, Warning() = %q; want OK and no warning", tc.r.OK(), w)
				}
				return
			}
			if w == "" || tc.r.OK() {
				t.Fatalf("OK() = %v, Warning() = %q; want a warning", tc.r.OK(), w)
			}
			if strings.Contains(w, "\n") {
				t.Errorf("warning spans lines: %q", w)
			}
			for _, s := range tc.want {
				if !strings.Contains(w, s) {
					t.Errorf("warning %q lacks %q", w, s)
				}
			}
		})
	}
}
