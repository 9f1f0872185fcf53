package xdpprog

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/vipd/vipd/testing/nstest"
)

// Privileged tests: they load BPF programs and build network namespaces
// (testing/nstest). They skip when the process is not root or the kernel
// refuses it the privilege (a restricted container), and fail on any
// other error: on a root shell of a kernel with XDP, a skip would hide a
// regression.

// skipIfDenied skips the test when err says the kernel denied privilege.
func skipIfDenied(t testing.TB, what string, err error) {
	t.Helper()
	if (errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES)) && !errors.Is(err, errRejected) {
		t.Skipf("the kernel refuses %s to this process (%v); run as root outside a restricted container", what, err)
	}
}

// load loads a Program that the test closes when it ends.
func load(t testing.TB, queues int) *Program {
	t.Helper()
	nstest.RequireRoot(t)
	p, err := Load(queues)
	skipIfDenied(t, "BPF", err)
	if err != nil {
		t.Fatalf("Load(%d): %v", queues, err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

// newNetNS makes a network namespace that exists for one test. Deleting
// it destroys its interfaces, and with them any XDP attachment; sockets
// opened inside must be closed first (cleanups run last-in first-out, so
// register those after this).
func newNetNS(t testing.TB) *nstest.NS {
	t.Helper()
	nstest.RequireRoot(t)
	return nstest.New(t, "xdp")
}
