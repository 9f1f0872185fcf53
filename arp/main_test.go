package arp

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// TestMain fails the run when the tests leave file descriptors open: every
// socket the package opens (AF_PACKET, rtnetlink) must be closed by the Run
// or call that opened it, fakes or not.
func TestMain(m *testing.M) {
	// Start the runtime's netpoller first so that its own descriptors are
	// part of the baseline.
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	before := openFDs()
	code := m.Run()
	if code == 0 {
		// Closing is synchronous, but give stragglers from cleanup a moment.
		var leaked map[string]string
		for range 20 {
			if leaked = diffFDs(before, openFDs()); len(leaked) == 0 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if len(leaked) > 0 {
			fmt.Fprintf(os.Stderr, "leaked file descriptors: %v\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// openFDs maps each open descriptor to what it refers to.
func openFDs() map[string]string {
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

func diffFDs(before, after map[string]string) map[string]string {
	self, _ := os.Readlink("/proc/self")
	leaked := map[string]string{}
	for fd, target := range after {
		// The directory handle of the listing itself is not a leak.
		if before[fd] != target && target != "/proc/"+self+"/fd" {
			leaked[fd] = target
		}
	}
	return leaked
}
