package testkit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// errRecorder is a testing.TB that records Errorf's messages and the
// cleanups registered, which the test runs.
type errRecorder struct {
	testing.TB
	mu       sync.Mutex
	errs     []string
	cleanups []func()
}

func (r *errRecorder) Helper() {}

func (r *errRecorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *errRecorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

func TestGo(t *testing.T) {
	boom := errors.New("boom")
	release := make(chan struct{}) // ends the run that ignores its context
	defer close(release)
	for _, c := range []struct {
		name string
		run  func(ctx context.Context) error
		want []string
	}{
		{"stops when cancelled", func(ctx context.Context) error { <-ctx.Done(); return nil }, nil},
		{"an error", func(ctx context.Context) error { <-ctx.Done(); return boom }, []string{"server: boom"}},
		{"does not stop", func(context.Context) error { <-release; return nil }, []string{"server did not return within 10ms of cancel"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &errRecorder{}
			g := Go(r, "server", 10*time.Millisecond, c.run)
			select {
			case <-g.Done():
				t.Fatal("Done before Stop")
			default:
			}
			if len(r.cleanups) != 1 {
				t.Fatalf("%d cleanups, want 1 (Stop)", len(r.cleanups))
			}
			r.cleanups[0]()
			g.Stop() // again: nothing more
			if fmt.Sprint(r.errs) != fmt.Sprint(c.want) {
				t.Errorf("reported %q, want %q", r.errs, c.want)
			}
		})
	}
	// A run that ends on its own: Done says so, Err holds its error.
	r := &errRecorder{}
	g := Go(r, "server", time.Second, func(context.Context) error { return boom })
	<-g.Done()
	if g.Err() != boom {
		t.Errorf("Err = %v, want %v", g.Err(), boom)
	}
}
