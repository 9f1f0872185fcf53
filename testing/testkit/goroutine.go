package testkit

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Runner is a function that runs on a goroutine of its own for a test
// (a daemon's or a server's Run), started by Go.
type Runner struct {
	tb      testing.TB
	what    string
	timeout time.Duration
	cancel  context.CancelFunc
	done    chan struct{}
	err     error // run's, once done is closed
	once    sync.Once
}

// Go runs run on a goroutine of its own with a context that Stop, or the
// end of the test, cancels; then it waits for run to return, at most
// timeout. An error from run, or no return within timeout, fails the
// test: "<what>: <error>", "<what> did not return within <timeout> of
// cancel".
func Go(tb testing.TB, what string, timeout time.Duration, run func(context.Context) error) *Runner {
	ctx, cancel := context.WithCancel(context.Background())
	r := &Runner{tb: tb, what: what, timeout: timeout, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = run(ctx)
	}()
	tb.Cleanup(r.Stop)
	return r
}

// Done is closed when run has returned, on its own or stopped; Err is
// then what it returned.
func (r *Runner) Done() <-chan struct{} { return r.done }

// Err is what run returned; call it after Done is closed.
func (r *Runner) Err() error { return r.err }

// Stop cancels run's context and waits for it to return (see Go). Calls
// after the first do nothing.
func (r *Runner) Stop() {
	r.once.Do(func() {
		r.cancel()
		select {
		case <-r.done:
			if r.err != nil {
				r.tb.Errorf("%s: %v", r.what, r.err)
			}
		case <-time.After(r.timeout):
			r.tb.Errorf("%s did not return within %v of cancel", r.what, r.timeout)
		}
	})
}
