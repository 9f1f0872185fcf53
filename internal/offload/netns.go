package offload

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// ioctlSocketIn opens a socket for interface ioctls that belongs to the
// network namespace ns refers to. It switches a locked OS thread of its own
// into ns only for the socket call; the socket stays in ns and may be used
// from any thread afterwards.
//
// The thread is switched back to the namespace it came from before it is
// unlocked. If that fails the thread stays locked, and the runtime discards
// it when the goroutine ends instead of running other goroutines in a
// foreign namespace.
func ioctlSocketIn(ns *os.File) (int, error) {
	type result struct {
		fd  int
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{-1, fmt.Errorf("offload: own network namespace: %w", err)}
			return
		}
		defer orig.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			// Nothing changed: the thread is still where it was.
			runtime.UnlockOSThread()
			done <- result{-1, fmt.Errorf("offload: setns: %w", err)}
			return
		}
		fd, err := ioctlSocket()
		if rerr := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); rerr != nil {
			// Stay locked: the thread dies with this goroutine.
			if err == nil {
				unix.Close(fd)
			}
			done <- result{-1, fmt.Errorf("offload: setns back to own namespace: %w (thread discarded)", rerr)}
			return
		}
		runtime.UnlockOSThread()
		done <- result{fd, err}
	}()
	r := <-done
	return r.fd, r.err
}
