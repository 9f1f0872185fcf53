package xdpprog

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Privileged tests: they load BPF programs and build network namespaces.
// They skip when the process is not root or the kernel refuses it the
// privilege (a restricted container), and fail on any other error: on a
// root shell of a kernel with XDP, a skip would hide a regression.

func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: loads BPF programs and creates network namespaces")
	}
}

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
	needRoot(t)
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

var nsSeq atomic.Int32

// netNS is a named network namespace that exists for one test. Names carry
// the PID so that parallel runs do not collide.
type netNS struct{ name string }

func newNetNS(t testing.TB) *netNS {
	t.Helper()
	needRoot(t)
	n := &netNS{name: fmt.Sprintf("vipdxdp-%d-%d", os.Getpid(), nsSeq.Add(1))}
	out, err := exec.Command("ip", "netns", "add", n.name).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "Operation not permitted") {
			t.Skipf("cannot create a network namespace: %s", out)
		}
		t.Fatalf("ip netns add %s: %v: %s", n.name, err, out)
	}
	// Deleting the namespace destroys its interfaces, and with them any XDP
	// attachment; sockets opened inside must be closed first (cleanups run
	// last-in first-out, so register those after this).
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", n.name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", n.name, err, out)
		}
	})
	return n
}

// ip runs `ip -n NS args...` and returns its output.
func (n *netNS) ip(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"-n", n.name}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip -n %s %s: %v: %s", n.name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// ifindex returns the index of interface name in the namespace.
func (n *netNS) ifindex(t testing.TB, name string) int {
	t.Helper()
	var links []struct {
		Ifindex int `json:"ifindex"`
	}
	out := n.ip(t, "-j", "link", "show", "dev", name)
	if err := json.Unmarshal([]byte(out), &links); err != nil || len(links) != 1 {
		t.Fatalf("ip -j link show dev %s: %v: %s", name, err, out)
	}
	return links[0].Ifindex
}

// do runs f on an OS thread that has entered the namespace, and only
// there. The thread is a fresh goroutine's, locked for the call; it
// returns to the original namespace before it is unlocked, and if it
// cannot, it stays locked so that the runtime ends it with the goroutine:
// no other goroutine ever runs in a foreign namespace.
func (n *netNS) do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open own netns: %w", err)
			return
		}
		defer unix.Close(orig)
		target, err := unix.Open("/run/netns/"+n.name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open netns %s: %w", n.name, err)
			return
		}
		defer unix.Close(target)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter netns %s: %w", n.name, err)
			return
		}
		ferr := f()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("leave netns %s: %w (thread discarded)", n.name, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// vethPair creates veth pair a–b, both ends up, in namespace n, or with b
// in namespace peer when peer is not nil. It returns once both ends run.
func vethPair(t testing.TB, n *netNS, a, b string, peer *netNS) {
	t.Helper()
	if peer == nil {
		peer = n
		n.ip(t, "link", "add", a, "type", "veth", "peer", "name", b)
	} else {
		n.ip(t, "link", "add", a, "type", "veth", "peer", "name", b, "netns", peer.name)
	}
	peer.ip(t, "link", "set", b, "up")
	n.ip(t, "link", "set", a, "up")
	peer.waitRunning(t, b)
	n.waitRunning(t, a)
}

// waitRunning waits, at most 30 s, until interface dev is operationally
// up. When a veth's second end comes up the kernel turns the carrier on
// at both ends, but the end that was up first starts transmitting only
// when the kernel's link-watch work gets to it, which a busy machine
// delays by a second or more; until then its frames are dropped without
// an error to the sender.
func (n *netNS) waitRunning(t testing.TB, dev string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out := n.ip(t, "-o", "link", "show", "dev", dev)
		if strings.Contains(out, " state UP ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s in %s not running after 30 s: %s", dev, n.name, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
