package admin

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vipd/vipd/health"
)

var (
	dCheckDuration = desc("health_check_duration_seconds", "How long a backend's health checks took (a failed one until its error or timeout).", "vip", "backend")
	dChecks        = desc("health_checks_total", "A backend's health checks, by result (ok, fail).", "vip", "backend", "result")
)

// collectChecks adds the health checks' metrics of the backends in m
// (labels from m.Backends, so the cardinality is that of the backends).
func collectChecks(m *Metrics, ch chan<- prometheus.Metric) {
	for ref, r := range m.HealthChecks {
		l, ok := m.Backends[ref]
		if !ok {
			continue
		}
		buckets := make(map[float64]uint64, len(health.CheckBuckets))
		var cum uint64
		for i, b := range health.CheckBuckets {
			cum += r.Buckets[i]
			buckets[b] = cum
		}
		ch <- prometheus.MustNewConstHistogram(dCheckDuration, r.OK+r.Fail, r.Seconds, buckets, l.VIP, l.Backend)
		ch <- prometheus.MustNewConstMetric(dChecks, prometheus.CounterValue, float64(r.OK), l.VIP, l.Backend, "ok")
		ch <- prometheus.MustNewConstMetric(dChecks, prometheus.CounterValue, float64(r.Fail), l.VIP, l.Backend, "fail")
	}
}
