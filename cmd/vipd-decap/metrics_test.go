package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vipd/vipd/dsr/decap"
)

// scrape parses a Prometheus text exposition into families by name.
func scrape(t *testing.T, body io.Reader) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(body)
	if err != nil {
		t.Fatalf("parse metrics: %v", err)
	}
	return fams
}

// value returns the value of the series of fam whose labels include
// labels (name, value pairs); ok is false when there is none.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) (v float64, ok bool) {
	fam := fams[name]
	if fam == nil {
		return 0, false
	}
next:
	for _, m := range fam.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		}
	}
	return 0, false
}

// TestMetrics: every Stats counter is exported under its name, every drop
// reason as its own series (zeros too), and the build info gauge says
// which build runs.
func TestMetrics(t *testing.T) {
	s := decap.Stats{Received: 100, GUE: 40, Decapsulated: 90, Bytes: 123456, Completed: 3, Hinted: 30, Lookups: 7, CacheHits: 11}
	for r := range decap.NumReasons {
		s.Dropped[r] = uint64(r) // reason i has i drops, so each series is told apart
	}
	for o := range decap.NumHintOutcomes {
		s.Hints[o] = uint64(o) + 20 // likewise
	}
	srv := httptest.NewServer(metricsHandler(func() decap.Stats { return s }))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics: %s, %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	fams := scrape(t, resp.Body)
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"vipd_decap_received_total", nil, 100},
		{"vipd_decap_gue_received_total", nil, 40},
		{"vipd_decap_decapsulated_total", nil, 90},
		{"vipd_decap_decapsulated_bytes_total", nil, 123456},
		{"vipd_decap_checksums_completed_total", nil, 3},
		{"vipd_decap_hinted_total", nil, 30},
		{"vipd_decap_hint_lookups_total", nil, 7},
		{"vipd_decap_hint_cache_hits_total", nil, 11},
		{"vipd_decap_build_info", []string{"version", version, "goversion", runtime.Version()}, 1},
	} {
		if got, ok := value(fams, tc.name, tc.labels...); !ok || got != tc.want {
			t.Errorf("%s%v = %v (present %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	if n := len(fams["vipd_decap_dropped_total"].GetMetric()); n != int(decap.NumReasons) {
		t.Errorf("%d dropped_total series, want one per reason (%d)", n, decap.NumReasons)
	}
	for r := range decap.NumReasons {
		if got, ok := value(fams, "vipd_decap_dropped_total", "reason", r.String()); !ok || got != float64(r) {
			t.Errorf("dropped_total{reason=%q} = %v (present %v), want %d", r, got, ok, r)
		}
	}
	if n := len(fams["vipd_decap_hint_outcomes_total"].GetMetric()); n != int(decap.NumHintOutcomes) {
		t.Errorf("%d hint_outcomes_total series, want one per outcome (%d)", n, decap.NumHintOutcomes)
	}
	for o := range decap.NumHintOutcomes {
		if got, ok := value(fams, "vipd_decap_hint_outcomes_total", "outcome", o.String()); !ok || got != float64(o)+20 {
			t.Errorf("hint_outcomes_total{outcome=%q} = %v (present %v), want %d", o, got, ok, o+20)
		}
	}
	if _, ok := fams["process_start_time_seconds"]; !ok && runtime.GOOS == "linux" {
		t.Errorf("no process metrics")
	}
}
