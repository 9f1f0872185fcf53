package procs

import (
	"os"
	"runtime"
)

// Env is the environment variable that sets GOMAXPROCS; Spare leaves an
// explicit setting alone.
const Env = "GOMAXPROCS"

// Result says what Spare found and did.
type Result struct {
	Before, After int  // GOMAXPROCS before and after
	FromEnv       bool // GOMAXPROCS was set in the environment: left as is
}

// Raised reports whether Spare changed GOMAXPROCS.
func (r Result) Raised() bool { return r.After != r.Before }

// Short reports whether GOMAXPROCS leaves no P for the rest of the
// program once workers run: only possible when the environment set it.
func (r Result) Short(workers int) bool { return r.After < workers+1 }

// Spare makes GOMAXPROCS at least workers+1, so that workers goroutines
// that each hold a P leave one for the rest of the program (package doc).
// A GOMAXPROCS set in the environment is the operator's and is kept. A
// default already large enough is kept too, so that the runtime goes on
// following the CPU limit it was derived from; raising it stops that (see
// runtime.GOMAXPROCS).
func Spare(workers int) Result {
	cur := runtime.GOMAXPROCS(0)
	r := Result{Before: cur, After: cur}
	if _, ok := os.LookupEnv(Env); ok {
		r.FromEnv = true
		return r
	}
	if want := workers + 1; cur < want {
		runtime.GOMAXPROCS(want)
		r.After = want
	}
	return r
}
