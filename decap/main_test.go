//go:build linux

package decap

import (
	"fmt"
	"os"
	"slices"
	"testing"
)

// TestMain fails the run when a test leaks a file descriptor: a leaked
// TUN file keeps its device alive, a leaked raw socket keeps receiving.
func TestMain(m *testing.M) {
	// The runtime poller's descriptors live as long as the process; start
	// it before counting (os.Pipe files are pollable).
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	before := openFDs()
	code := m.Run()
	if code == 0 {
		var leaked []string
		for fd, target := range openFDs() {
			if before[fd] != target {
				leaked = append(leaked, fd+" → "+target)
			}
		}
		if len(leaked) > 0 {
			slices.Sort(leaked)
			fmt.Fprintf(os.Stderr, "FAIL: leaked file descriptors: %v\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

func openFDs() map[string]string {
	fds := make(map[string]string)
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return fds
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	for _, n := range names {
		if target, err := os.Readlink("/proc/self/fd/" + n); err == nil {
			fds[n] = target
		}
	}
	delete(fds, fmt.Sprint(d.Fd()))
	return fds
}
