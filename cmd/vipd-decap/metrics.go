package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vipd/vipd/dsr/decap"
)

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("vipd_decap_"+name, help, labels, nil)
}

var (
	dReceived  = desc("received_total", "Packets read from the IPIP, IPv6-in-IPv6 and GUE sockets.")
	dGUE       = desc("gue_received_total", "Of received_total, the datagrams read from the GUE sockets.")
	dDecap     = desc("decapsulated_total", "Inner packets written to the TUN device.")
	dBytes     = desc("decapsulated_bytes_total", "Bytes of the inner packets written to the TUN device.")
	dCompleted = desc("checksums_completed_total", "Inner TCP segments merged by receive offload (GRO) whose checksum was finished.")
	dDropped   = desc("dropped_total", "Packets not delivered, by reason (see go doc github.com/vipd/vipd/dsr/decap Reason).", "reason")
	dHinted    = desc("hinted_total", "GUE datagrams with a well-formed previous-owner hint.")
	dHints     = desc("hint_outcomes_total", "What became of hinted packets: delivered here by reason (match, syn, chained_in, lookup_error, chaining_off, no_ports) or chained_out to the previous owner.", "outcome")
	dLookups   = desc("hint_lookups_total", "Kernel socket lookups (NETLINK_SOCK_DIAG) made for hinted packets.")
	dCacheHits = desc("hint_cache_hits_total", "Hinted packets decided by the lookup cache instead of a kernel lookup.")
	dBuildInfo = desc("build_info", "Always 1; the labels say which build runs.", "version", "goversion")
)

// collector turns a Decap's Stats into metrics at scrape time. stats is a
// function, not a *decap.Decap, so that the collector is testable alone.
type collector struct {
	stats func() decap.Stats
}

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	prometheus.DescribeByCollect(c, ch)
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(dReceived, s.Received)
	counter(dGUE, s.GUE)
	counter(dDecap, s.Decapsulated)
	counter(dBytes, s.Bytes)
	counter(dCompleted, s.Completed)
	// Every reason, zeros included: a series that appears only on the
	// first drop breaks rate() and alerts on it.
	for r := range decap.NumReasons {
		counter(dDropped, s.Dropped[r], r.String())
	}
	counter(dHinted, s.Hinted)
	for o := range decap.NumHintOutcomes {
		counter(dHints, s.Hints[o], o.String())
	}
	counter(dLookups, s.Lookups)
	counter(dCacheHits, s.CacheHits)
	ch <- prometheus.MustNewConstMetric(dBuildInfo, prometheus.GaugeValue, 1, version, runtime.Version())
}

// metricsHandler serves the counters, the Go runtime's and the process's
// metrics in the Prometheus text format.
func metricsHandler(stats func() decap.Stats) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector{stats: stats},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}

// serveMetrics serves h on ln until ctx is done, then shuts down within
// a second. It returns when the server has stopped.
func serveMetrics(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger) {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	stop := context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	})
	defer stop()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("metrics server", "err", err)
	}
}
