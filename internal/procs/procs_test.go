package procs

import (
	"os"
	"runtime"
	"testing"
)

func TestSpare(t *testing.T) {
	for _, tc := range []struct {
		name          string
		env           string // "" = unset
		start         int
		workers       int
		after         int
		raised, short bool
	}{
		{name: "one CPU, one worker", start: 1, workers: 1, after: 2, raised: true},
		{name: "as many CPUs as workers", start: 4, workers: 4, after: 5, raised: true},
		{name: "a CPU to spare already", start: 4, workers: 2, after: 4},
		{name: "exactly one to spare", start: 3, workers: 2, after: 3},
		{name: "environment kept, short", env: "1", start: 1, workers: 1, after: 1, short: true},
		{name: "environment kept, enough", env: "8", start: 8, workers: 2, after: 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(Env, tc.env)
			} else if v, ok := os.LookupEnv(Env); ok {
				// t.Setenv restores it afterwards; then unset it here.
				t.Setenv(Env, v)
				os.Unsetenv(Env)
			}
			old := runtime.GOMAXPROCS(tc.start)
			t.Cleanup(func() { runtime.GOMAXPROCS(old) })
			r := Spare(tc.workers)
			if got := runtime.GOMAXPROCS(0); got != tc.after || r.After != tc.after || r.Before != tc.start {
				t.Errorf("GOMAXPROCS %d, result %+v; want %d → %d", got, r, tc.start, tc.after)
			}
			if r.Raised() != tc.raised || r.Short(tc.workers) != tc.short || r.FromEnv != (tc.env != "") {
				t.Errorf("raised %v short %v fromEnv %v; want %v %v %v", r.Raised(), r.Short(tc.workers), r.FromEnv, tc.raised, tc.short, tc.env != "")
			}
		})
	}
}
