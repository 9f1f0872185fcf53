package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/vipd/vipd/control/admin/api"
)

// Access is what the callers of a listener may do.
type Access int

const (
	// ReadOnly serves GET /, /metrics, /healthz, /v1/state, /v1/where and
	// /v1/conns and refuses every change (403): for the TCP listener,
	// which every local user, and every web page a browser on the box
	// opens, can reach.
	ReadOnly Access = iota
	// Control serves the changes too (POST /v1/drain, /v1/override,
	// /v1/reload, /v1/drain-box, /v1/role): only for a listener whose transport
	// authenticates its callers, such as a Unix socket with mode 0600.
	Control
)

// httpError answers a change that failed with err, its status by the
// sentinel err wraps: 404 api.ErrNotFound, 409 api.ErrConflict and
// api.ErrNoBGP (the file or the setup decides, not the request), 400
// api.ErrInvalid, else 500.
func httpError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, api.ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, api.ErrConflict), errors.Is(err, api.ErrNoBGP):
		code = http.StatusConflict
	case errors.Is(err, api.ErrInvalid):
		code = http.StatusBadRequest
	}
	http.Error(w, err.Error(), code)
}

// Handler returns the admin HTTP handler over p, for callers with the
// given access. Until p.Ready returns nil, every request is answered 503.
// /metrics also reports the extra collectors (the TCP listener's
// HostCheck, which both listeners show).
func Handler(p Provider, access Access, extra ...prometheus.Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector{p}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(extra...)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("GET /{$}", pageHandler(p))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /v1/events", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		var seq uint64
		var max int
		var err error
		if s := q.Get("since"); s != "" {
			if seq, err = strconv.ParseUint(s, 10, 64); err != nil {
				http.Error(w, "since: want an event's sequence number, not "+strconv.Quote(s), http.StatusBadRequest)
				return
			}
		}
		if s := q.Get("max"); s != "" {
			if max, err = strconv.Atoi(s); err != nil || max < 0 {
				http.Error(w, "max: want a count, not "+strconv.Quote(s), http.StatusBadRequest)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(p.Events(seq, max))
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
	mux.HandleFunc("GET /v1/conns", handleConns(p))
	mux.HandleFunc("GET /v1/where", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		port := uint16(0)
		if ps := q.Get("port"); ps != "" {
			n, err := strconv.ParseUint(ps, 10, 16)
			if err != nil {
				http.Error(w, "port must be 0..65535", http.StatusBadRequest)
				return
			}
			port = uint16(n)
		}
		if q.Get("vip") == "" || q.Get("client") == "" {
			http.Error(w, "want ?vip=NAME&client=ADDR:PORT[&port=VIPPORT]", http.StatusBadRequest)
			return
		}
		ans, err := p.Where(q.Get("vip"), q.Get("client"), port)
		if err != nil {
			code := http.StatusBadRequest
			if errors.Is(err, api.ErrNotFound) {
				code = http.StatusNotFound
			}
			http.Error(w, err.Error(), code)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(ans)
	})
	if access != Control {
		mux.HandleFunc("POST /v1/drain", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "this listener is read-only: drains are served on vipd's admin socket ([admin] socket) only; use `vipd drain` as root", http.StatusForbidden)
		})
		mux.HandleFunc("POST /v1/drain-box", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "this listener is read-only: drain-box is served on vipd's admin socket ([admin] socket) only; use `vipd drain-box` as root", http.StatusForbidden)
		})
		mux.HandleFunc("POST /v1/override", overrideReadOnly)
		mux.HandleFunc("POST /v1/reload", refuseReload)
		mux.HandleFunc("POST /v1/role", refuseRole)
		return ready(p, mux)
	}
	mux.Handle("POST /v1/drain", jsonOnly(func(w http.ResponseWriter, r *http.Request) {
		var req api.DrainRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || req.VIP == "" || req.Backend == "" || req.Drain == nil {
			http.Error(w, `want {"vip": NAME, "backend": "ADDR:PORT", "drain": true|false}`, http.StatusBadRequest)
			return
		}
		if err := p.SetDrain(req.VIP, req.Backend, *req.Drain, req.Reason); err != nil {
			httpError(w, err)
			return
		}
		fmt.Fprintln(w, "ok")
	}))
	mux.Handle("POST /v1/drain-box", handleDrainBox(p))
	mux.Handle("POST /v1/override", handleOverride(p))
	mux.Handle("POST /v1/reload", handleReload(p))
	mux.Handle("POST /v1/role", handleRole(p))
	return ready(p, mux)
}

// ready answers 503 until p is ready, and hands requests to h after.
func ready(p Provider, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := p.Ready(); err != nil {
			w.Header().Set("Retry-After", "1")
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// jsonOnly refuses (415) a request whose body is not declared JSON. A web
// page can make a browser send a cross-origin POST unasked only with a
// form or text/plain body; for application/json the browser first asks
// the server (a CORS preflight, which vipd never grants).
func jsonOnly(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			http.Error(w, "Content-Type must be application/json", http.StatusUnsupportedMediaType)
			return
		}
		h(w, r)
	})
}
