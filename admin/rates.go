package admin

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vipd/vipd/admin/api"
)

// WriteRates prints st's rates like `ipvsadm -Ln --rate`: per VIP and
// backend, new flows, packets and bytes per second and the active flows.
func WriteRates(w io.Writer, st *api.State) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "Prot\tVIP:Port\tConnPS\tPktPS\tBytePS\tActiveFlows\t\n")
	fmt.Fprintf(tw, "  ->\tBackend:Port\t\t\t\t\t\n")
	for _, v := range st.VIPs {
		r := v.Rates
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t\n", strings.ToUpper(v.Protocol), api.HostPort(v.Address, v.Port),
			perSec(r.NewFlowsPerSec), perSec(r.PacketsPerSec), perSec(r.BytesPerSec), v.ActiveFlows)
		for _, b := range v.Backends {
			port := b.Port
			if port == 0 {
				port = v.Port
			}
			r := b.Rates
			fmt.Fprintf(tw, "  ->\t%s\t%s\t%s\t%s\t%d\t\n", api.HostPort(b.Address, port),
				perSec(r.NewFlowsPerSec), perSec(r.PacketsPerSec), perSec(r.BytesPerSec), b.ActiveFlows)
		}
	}
	return tw.Flush()
}

// WriteWorkers prints each worker's rates: received and sent packets per
// second and its drops per second by reason.
func WriteWorkers(w io.Writer, st *api.State) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Worker\tRxPPS\tTxPPS\tDrops/s\n")
	for _, ws := range st.WorkersDetail {
		reasons := make([]string, 0, len(ws.DropsPerSec))
		for r := range ws.DropsPerSec {
			reasons = append(reasons, r)
		}
		sort.Strings(reasons)
		var drops []string
		for _, r := range reasons {
			drops = append(drops, r+" "+perSec(ws.DropsPerSec[r]))
		}
		d := strings.Join(drops, ", ")
		if d == "" {
			d = "0"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", ws.Queue, perSec(ws.RxPerSec), perSec(ws.TxPerSec), d)
	}
	return tw.Flush()
}

// WriteTop is one frame of vipd top: the header of vipd status, the rates
// and the workers.
func WriteTop(w io.Writer, st *api.State, now time.Time) error {
	fmt.Fprintf(w, "vipd %s  %s  io %s  workers %d  conntrack %d/%d flows  snapshot %d\n\n",
		st.Version, now.Format("15:04:05"), st.IO, st.Workers, st.Conntrack.Entries, st.Conntrack.Capacity, st.Generation)
	if err := WriteRates(w, st); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return WriteWorkers(w, st)
}

// perSec is a rate rounded as ipvsadm prints it, with K, M and G above a
// thousand.
func perSec(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.1fG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.1fK", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

var (
	dVIPActive = desc("vip_active_flows", "Flows pinned to a VIP's backends now (as vipd status counts them, at most 1 s old).", "vip")
	dBeActive  = desc("backend_active_flows", "Flows pinned to a backend now (as vipd status counts them, at most 1 s old).", "vip", "backend")
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
	}
	for vip, n := range perVIP {
		ch <- prometheus.MustNewConstMetric(dVIPActive, prometheus.GaugeValue, float64(n), vip)
	}
}
