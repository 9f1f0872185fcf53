package admin

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vipd/vipd/health"
)

// TestHealthCheckMetrics: each checked backend has its check counter by
// result and its duration histogram; a record without a label is left out.
func TestHealthCheckMetrics(t *testing.T) {
	rec := health.Record{OK: 5, Fail: 2, LastCheck: time.Millisecond, Seconds: 0.02}
	rec.Buckets[0], rec.Buckets[3] = 4, 3
	m := &Metrics{
		Backends:     map[uint32]BackendLabel{1: {VIP: "web", Backend: "198.18.1.11:80"}},
		HealthChecks: map[uint32]health.Record{1: rec, 9: rec},
	}
	got := gather(t, m, "vipd_health_checks_total", "result")
	if got["ok"] != 5 || got["fail"] != 2 || len(got) != 2 {
		t.Errorf("vipd_health_checks_total = %v", got)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(collector{&metricsProvider{m: m}})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, f := range fams {
		if f.GetName() != "vipd_health_check_duration_seconds" {
			continue
		}
		found = true
		if n := len(f.GetMetric()); n != 1 {
			t.Fatalf("%d series, want 1", n)
		}
		h := f.GetMetric()[0].GetHistogram()
		if h.GetSampleCount() != 7 || h.GetSampleSum() != 0.02 {
			t.Errorf("count %d sum %v", h.GetSampleCount(), h.GetSampleSum())
		}
		if b := h.GetBucket()[3]; b.GetUpperBound() != 0.01 || b.GetCumulativeCount() != 7 {
			t.Errorf("bucket 3: le %v count %d", b.GetUpperBound(), b.GetCumulativeCount())
		}
	}
	if !found {
		t.Error("no vipd_health_check_duration_seconds")
	}
}
