package procs

import (
	"runtime"
	"testing"
	"time"
)

// TestYielder checks when Busy yields: not on the first call, not before
// YieldEvery has passed since the last yield, once when it has, whatever
// the clock's origin and however the batches fall.
func TestYielder(t *testing.T) {
	const ms = int64(time.Millisecond)
	tests := []struct {
		name  string
		calls []int64 // the clock at each Busy
		want  int     // yields
	}{
		{"first call", []int64{7 * ms}, 0},
		{"within the interval", []int64{0 + 1, 1 * ms, 4 * ms}, 0},
		{"at the interval", []int64{1, 1 + 5*ms}, 1},
		{"every batch for 100 ms", batches(1000*ms, 50*time.Microsecond, 100*time.Millisecond), 20},
		{"a long batch counts once", []int64{1, 1 + 30*ms}, 1},
		{"a large origin", []int64{1 << 60, 1<<60 + 5*ms, 1<<60 + 9*ms, 1<<60 + 10*ms}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			y := Yielder{yield: func() { n++ }}
			for _, now := range tc.calls {
				y.Busy(now)
			}
			if n != tc.want {
				t.Errorf("%d yields, want %d", n, tc.want)
			}
		})
	}
}

// batches returns the clock of a batch every step for d from start.
func batches(start int64, step, d time.Duration) []int64 {
	var c []int64
	for now := start; now <= start+int64(d); now += int64(step) {
		c = append(c, now)
	}
	return c
}

// TestYielderRuntime runs Busy with runtime.Gosched: it must return, also
// on a locked thread, which is how workers call it.
func TestYielderRuntime(t *testing.T) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var y Yielder
		start := time.Now()
		for i := 0; i < 3; i++ {
			y.Busy(int64(time.Since(start)))
			time.Sleep(6 * time.Millisecond)
			y.Busy(int64(time.Since(start)))
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Busy did not return")
	}
}
