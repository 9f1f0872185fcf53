package admin

import "testing"

// TestActiveFlowsAndBuildInfo: the active-flow gauges sum a VIP's
// backends (a VIP without flows reads 0), and vipd_build_info is 1.
func TestActiveFlowsAndBuildInfo(t *testing.T) {
	m := &Metrics{
		VIPNames:    map[uint16]string{1: "web", 2: "dns"},
		Backends:    map[uint32]BackendLabel{1: {VIP: "web", Backend: "198.18.1.11:80"}, 2: {VIP: "web", Backend: "198.18.1.12:80"}},
		ActiveFlows: map[uint32]int{1: 3, 2: 4},
		Version:     "1.2.3", GoVersion: "go1.25",
	}
	if got := gather(t, m, "vipd_vip_active_flows", "vip"); got["web"] != 7 || got["dns"] != 0 || len(got) != 2 {
		t.Errorf("vipd_vip_active_flows %v", got)
	}
	if got := gather(t, m, "vipd_backend_active_flows", "backend"); got["198.18.1.12:80"] != 4 {
		t.Errorf("vipd_backend_active_flows %v", got)
	}
	if got := gather(t, m, "vipd_build_info", "version"); got["1.2.3"] != 1 {
		t.Errorf("vipd_build_info %v", got)
	}
	if got := gather(t, &Metrics{}, "vipd_vip_active_flows", "vip"); len(got) != 0 {
		t.Errorf("before the workers run: %v", got)
	}
}
