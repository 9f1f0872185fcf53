package admin

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
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
