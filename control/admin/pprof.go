package admin

import (
	"net/http"
	"net/http/pprof"
)

// WithPprof returns h with Go's runtime profiles (net/http/pprof) served
// under /debug/pprof/: the index, every named profile (heap, allocs,
// goroutine, threadcreate, block, mutex), cmdline, profile (CPU, ?seconds=N),
// symbol and trace. The handlers are registered on a mux of their own, not
// on http.DefaultServeMux. They answer even before the daemon is ready (a
// start that hangs is worth a goroutine profile); everything else goes to
// h. Serve it only where callers are trusted (the admin socket): a profile
// shows the process's memory, and a CPU profile or trace costs CPU while
// it runs.
func WithPprof(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	mux.Handle("/", h)
	return mux
}
