package fdleak

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"
)

// Main is a TestMain: it runs the tests and, when they pass, fails the run
// if descriptors that were not open before are open after (waiting up to a
// second for cleanups that close asynchronously).
func Main(m *testing.M) {
	// The runtime's netpoller keeps its descriptors for the life of the
	// process: start it before counting (pipe files are pollable).
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	before := open()
	code := m.Run()
	if code == 0 {
		var leaked []string
		for range 20 {
			if leaked = diff(before, open()); len(leaked) == 0 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if len(leaked) > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: leaked file descriptors: %v\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// open maps each open descriptor to what it refers to.
func open() map[string]string {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil
	}
	fds := make(map[string]string, len(ents))
	for _, e := range ents {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		fds[e.Name()] = target
	}
	return fds
}

func diff(before, after map[string]string) []string {
	self, _ := os.Readlink("/proc/self")
	var leaked []string
	for fd, target := range after {
		// The handle of the /proc/self/fd listing itself is not a leak.
		if before[fd] != target && target != "/proc/"+self+"/fd" {
			leaked = append(leaked, fd+" → "+target)
		}
	}
	slices.Sort(leaked)
	return leaked
}
