package admin

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vipd/vipd/control/admin/api"
)

// metricsProvider serves fixed Metrics.
type metricsProvider struct {
	fakeProvider
	m *Metrics
}

func (p *metricsProvider) Metrics() *Metrics { return p.m }

// gather returns the value of each series (a counter's or a gauge's) of
// family name, by the value of label.
func gather(t *testing.T, m *Metrics, name, label string) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(collector{&metricsProvider{m: m}})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == label {
					got[l.GetValue()] = s.GetCounter().GetValue() + s.GetGauge().GetValue()
				}
			}
		}
	}
	return got
}

// TestTunnelProberMetrics: the tunnel prober's counters are exported by
// event, and not at all without a prober.
func TestTunnelProberMetrics(t *testing.T) {
	const name = "vipd_tunnel_prober_packets_total"
	m := &Metrics{TunnelProber: map[string]uint64{"sent": 7, "not_probe": 1, "unknown": 2, "send_error": 3, "read_error": 4}}
	got := gather(t, m, name, "event")
	for event, want := range m.TunnelProber {
		if got[event] != float64(want) {
			t.Errorf("%s{event=%q} = %v, want %d", name, event, got[event], want)
		}
	}
	if len(got) != len(m.TunnelProber) {
		t.Errorf("series %v, want %v", got, m.TunnelProber)
	}
	if got := gather(t, &Metrics{}, name, "event"); len(got) != 0 {
		t.Errorf("without a prober: %v, want no series", got)
	}
}

// TestFleetMetrics: a box of a fleet exports its view of it; a box
// without [fleet] exports none of the fleet's series.
func TestFleetMetrics(t *testing.T) {
	m := &Metrics{Fleet: &api.FleetState{Connected: false, Stale: true, Revision: 42, AgeSeconds: 12.5, ApplyErrors: 3, CacheErrors: 1}}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(collector{&metricsProvider{m: m}})
	want := map[string]float64{
		"vipd_fleet_connected": 0, "vipd_fleet_stale": 1, "vipd_fleet_revision": 42,
		"vipd_fleet_revision_age_seconds": 12.5, "vipd_fleet_apply_errors_total": 3, "vipd_fleet_cache_errors_total": 1,
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "vipd_fleet_") {
			s := f.GetMetric()[0]
			got[f.GetName()] = s.GetCounter().GetValue() + s.GetGauge().GetValue()
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("fleet series %v, want %v", got, want)
	}
	reg = prometheus.NewPedanticRegistry()
	reg.MustRegister(collector{&metricsProvider{m: &Metrics{}}})
	fams, _ = reg.Gather()
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "vipd_fleet_") {
			t.Errorf("%s without [fleet]", f.GetName())
		}
	}
}

// TestConfigMetrics: the configuration file's gauges, as Prometheus names
// a reloadable configuration's.
func TestConfigMetrics(t *testing.T) {
	at := time.Unix(1_700_000_000, 500_000_000)
	for _, tc := range []struct {
		m    ConfigMetrics
		want map[string]float64
	}{
		{ConfigMetrics{LastReloadOK: true, LoadedAt: at}, map[string]float64{
			"vipd_config_last_reload_successful": 1, "vipd_config_last_reload_timestamp_seconds": 1_700_000_000.5, "vipd_config_file_differs": 0}},
		{ConfigMetrics{LastReloadOK: false, LoadedAt: at, FileDiffers: true}, map[string]float64{
			"vipd_config_last_reload_successful": 0, "vipd_config_last_reload_timestamp_seconds": 1_700_000_000.5, "vipd_config_file_differs": 1}},
	} {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(collector{&metricsProvider{m: &Metrics{Config: tc.m}}})
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, f := range fams {
			if strings.HasPrefix(f.GetName(), "vipd_config_") && f.GetName() != "vipd_config_reloads_total" {
				got[f.GetName()] = f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		if !maps.Equal(got, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.m, got, tc.want)
		}
	}
}
