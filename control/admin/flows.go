package admin

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vipd/vipd/conntrack"
)

var (
	dVIPActive = desc("vip_active_flows", "Flows pinned to a VIP's backends now (as vipd status counts them, at most 1 s old).", "vip")
	dBeActive  = desc("backend_active_flows", "Flows pinned to a backend now (as vipd status counts them, at most 1 s old).", "vip", "backend")
	dBeInact   = desc("backend_inactive_flows", "Of a backend's flows, those not established: half-open, closing, or datagram flows not yet proven (ipvsadm's InActConn).", "vip", "backend")
	dBuildInfo = desc("build_info", "1, labelled with vipd's version and the Go version it was built with.", "version", "goversion")
)

// collectFlows adds the active-flow gauges (per VIP and backend of
// m.Backends, so bounded like the other per-backend metrics) and
// vipd_build_info.
func collectFlows(m *Metrics, ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(dBuildInfo, prometheus.GaugeValue, 1, m.Version, m.GoVersion)
	if m.ActiveFlows == nil {
		return
	}
	perVIP := map[string]int{}
	for _, name := range m.VIPNames {
		perVIP[name] = 0
	}
	for ref, l := range m.Backends {
		n := m.ActiveFlows[ref]
		perVIP[l.VIP] += n
		ch <- prometheus.MustNewConstMetric(dBeActive, prometheus.GaugeValue, float64(n), l.VIP, l.Backend)
		ch <- prometheus.MustNewConstMetric(dBeInact, prometheus.GaugeValue, float64(m.ActiveFlows[ref|conntrack.InactiveBit]), l.VIP, l.Backend)
	}
	for vip, n := range perVIP {
		ch <- prometheus.MustNewConstMetric(dVIPActive, prometheus.GaugeValue, float64(n), vip)
	}
}
