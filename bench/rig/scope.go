package rig

import (
	"fmt"
	"sync"
)

// Scope is an nstest.T for a program: cleanups run in reverse order when
// the scope is closed. A child scope closes with its parent, so one
// interrupt handler on the root scope removes everything a run created.
// Fatalf panics with a *Failure, which Try turns back into an error.
type Scope struct {
	mu       sync.Mutex
	cleanups []func()
	closed   bool
}

// Failure is what Fatalf panics with.
type Failure struct{ Msg string }

func (f *Failure) Error() string { return f.Msg }

func (s *Scope) Helper() {}

// Cleanup registers f; on a closed scope it runs f at once.
func (s *Scope) Cleanup(f func()) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		f()
		return
	}
	s.cleanups = append(s.cleanups, f)
	s.mu.Unlock()
}

func (s *Scope) Fatalf(format string, args ...any) {
	panic(&Failure{Msg: fmt.Sprintf(format, args...)})
}

// Child returns a scope that is closed with s at the latest.
func (s *Scope) Child() *Scope {
	c := &Scope{}
	s.Cleanup(c.Close)
	return c
}

// Close runs the cleanups, last first, once.
func (s *Scope) Close() {
	s.mu.Lock()
	cs := s.cleanups
	s.cleanups = nil
	s.closed = true
	s.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
}

// Try runs f and returns the failure it raised through Fatalf, if any;
// other panics propagate.
func Try(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if fl, ok := r.(*Failure); ok {
				err = fl
				return
			}
			panic(r)
		}
	}()
	f()
	return nil
}
