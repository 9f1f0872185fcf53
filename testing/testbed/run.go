package testbed

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// Run is the nstest.T of a command that drives a bed outside of go test
// (make demo, make demo-ecmp): cleanups run in reverse by Finish — at the
// end, on a fatal error, or on Ctrl-C — and then the bed's binaries go.
type Run struct {
	name     string // prefixes error messages
	mu       sync.Mutex
	cleanups []func()
}

// NewRun returns a Run whose messages start with name.
func NewRun(name string) *Run { return &Run{name: name} }

// Helper is part of nstest.T; a command has no call frames to hide.
func (r *Run) Helper() {}

// Cleanup registers f to run at Finish.
func (r *Run) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

// Fatalf reports the error, runs the cleanups and exits with status 1.
func (r *Run) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, r.name+": "+format+"\n", args...)
	r.Finish()
	os.Exit(1)
}

// Finish runs the cleanups, newest first, once, and removes the bed's
// binaries.
func (r *Run) Finish() {
	r.mu.Lock()
	cs := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
	if err := RemoveBinaries(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: removing the bed's binaries: %v\n", r.name, err)
	}
}

// Go runs f with r, cleans up after it — also on SIGINT or SIGTERM, which
// then exit with status 130 — and returns how long f took.
func (r *Run) Go(f func(*Run)) time.Duration {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sigs
		fmt.Fprintln(os.Stderr, "\ninterrupted: cleaning up")
		r.Finish()
		os.Exit(130)
	}()
	start := time.Now()
	f(r)
	r.Finish()
	return time.Since(start)
}
