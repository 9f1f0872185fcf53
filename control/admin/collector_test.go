package admin

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/dataplane"
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

// TestHandshakeHistogram: a backend's handshake times are a histogram in
// seconds with cumulative buckets, its sum and count the workers'; a
// backend without a handshake has none.
func TestHandshakeHistogram(t *testing.T) {
	var f, idle dataplane.FlowCounters
	f.Handshakes, f.Answered = 5, 4
	f.HandshakeTime[1] = 2                               // (0.5 ms, 1 ms]
	f.HandshakeTime[3] = 1                               // (2 ms, 5 ms]
	f.HandshakeTime[len(dataplane.HandshakeBuckets)] = 1 // over 3 s
	f.HandshakeNanos = 4_004_000_000
	m := &Metrics{
		Workers:  []*dataplane.Counters{{Backends: []dataplane.FlowCounters{f, idle}}},
		Backends: map[uint32]BackendLabel{0: {VIP: "web", Backend: "a"}, 1: {VIP: "web", Backend: "b"}},
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(collector{&metricsProvider{m: m}})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var h *dto.Histogram
	n := 0
	for _, fam := range fams {
		if fam.GetName() == "vipd_backend_handshake_seconds" {
			n = len(fam.GetMetric())
			h = fam.GetMetric()[0].GetHistogram()
		}
	}
	if n != 1 || h == nil {
		t.Fatalf("%d series, want 1 (the backend with handshakes)", n)
	}
	if h.GetSampleCount() != 4 || h.GetSampleSum() != 4.004 {
		t.Errorf("count %d sum %v, want 4 and 4.004", h.GetSampleCount(), h.GetSampleSum())
	}
	want := map[float64]uint64{0.0005: 0, 0.001: 2, 0.002: 2, 0.005: 3, 3: 3}
	for _, b := range h.GetBucket() {
		if w, ok := want[b.GetUpperBound()]; ok && b.GetCumulativeCount() != w {
			t.Errorf("le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), w)
		}
	}
}
