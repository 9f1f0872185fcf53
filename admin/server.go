package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ErrNotFound is returned by Provider.SetDrain for an unknown VIP or
// backend; the handler answers 404.
var ErrNotFound = errors.New("not found")

// Handler returns the admin HTTP handler over p.
func Handler(p Provider) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector{p}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /v1/state", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		st, err := p.State(ctx)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(st)
	})
	mux.HandleFunc("POST /v1/drain", func(w http.ResponseWriter, r *http.Request) {
		var req DrainRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || req.VIP == "" || req.Backend == "" || req.Drain == nil {
			http.Error(w, `want {"vip": NAME, "backend": "ADDR:PORT", "drain": true|false}`, http.StatusBadRequest)
			return
		}
		if err := p.SetDrain(req.VIP, req.Backend, *req.Drain); err != nil {
			code := http.StatusInternalServerError
			if errors.Is(err, ErrNotFound) {
				code = http.StatusNotFound
			}
			http.Error(w, err.Error(), code)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// DrainRequest is the body of POST /v1/drain.
type DrainRequest struct {
	VIP     string `json:"vip"`
	Backend string `json:"backend"`
	Drain   *bool  `json:"drain"`
}
