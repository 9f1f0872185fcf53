package arp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vipd/vipd/internal/testkit"
)

// Privileged test helpers: throwaway network namespaces, and running code on
// an OS thread switched into one.

// requireRoot skips a privileged test for non-root users. As root nothing is
// skipped: a failure to build the test bed fails the test, because CI runs
// as root on a kernel that has everything needed.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("privileged test: needs root for network namespaces, veth and AF_PACKET (CI runs it as root)")
	}
}

// sh runs a command with a bound on its run time and fails the test when it
// fails.
func sh(t *testing.T, args ...string) string {
	t.Helper()
	out, err := shErr(args...)
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func shErr(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	return string(out), err
}

type netns struct {
	name string
	fd   int
}

// newNetNS creates a network namespace with a name unique to this run,
// brings its loopback up and deletes it when the test ends, failed or not.
func newNetNS(t *testing.T, role string) *netns {
	t.Helper()
	var b [4]byte
	rand.Read(b[:])
	name := fmt.Sprintf("vipd-arp-%s-%d-%s", role, os.Getpid(), hex.EncodeToString(b[:]))
	sh(t, "ip", "netns", "add", name)
	t.Cleanup(func() {
		if out, err := shErr("ip", "netns", "del", name); err != nil {
			t.Errorf("delete namespace %s: %v\n%s", name, err, out)
		}
	})
	fd, err := unix.Open("/run/netns/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open namespace %s: %v", name, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	sh(t, "ip", "-n", name, "link", "set", "lo", "up")
	return &netns{name: name, fd: fd}
}

// do runs f on an OS thread switched into ns and waits for it. f must not
// call t.FailNow (it is not on the test goroutine); t.Error is fine.
func (ns *netns) do(t *testing.T, f func()) {
	t.Helper()
	ns.start(t, f)()
}

// start runs f on an OS thread switched into ns and returns a function that
// waits for f to return. Sockets f opens belong to ns; goroutines f starts
// run in the test's own namespace. The thread goes back to its original
// namespace before it is unlocked; if that fails it stays locked and the
// runtime discards it when the goroutine ends, so no goroutine ever runs in
// a foreign namespace by accident.
func (ns *netns) start(t *testing.T, f func()) (join func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			t.Errorf("open own namespace: %v", err)
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(ns.fd, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			t.Errorf("enter namespace %s: %v", ns.name, err)
			return
		}
		defer func() {
			if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
				t.Errorf("return from namespace %s: %v (thread discarded)", ns.name, err)
				return
			}
			runtime.UnlockOSThread()
		}()
		f()
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			select {
			case <-done:
			case <-time.After(2 * wait):
				t.Errorf("code in namespace %s did not finish within %v", ns.name, 2*wait)
			}
		})
	}
}

// testBed is two namespaces joined by a veth pair: A is the vipd box
// (vipd0), B a peer (peer0) on the same link. Addresses come from
// 198.18.0.0/15 and 2001:2::/48 only and exist only inside the namespaces.
type testBed struct {
	a, b       *netns
	macA, macB [6]byte
	ifA, ifB   string
}

const (
	bedMACA = "02:00:5e:0a:00:01"
	bedMACB = "02:00:5e:0b:00:01"
)

func newTestBed(t *testing.T) *testBed {
	t.Helper()
	requireRoot(t)
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("the privileged tests need iproute2's ip: %v", err)
	}
	bed := &testBed{
		a: newNetNS(t, "a"), b: newNetNS(t, "b"),
		macA: mustMAC(bedMACA), macB: mustMAC(bedMACB),
		ifA: "vipd0", ifB: "peer0",
	}
	// Created inside A, peer moved straight into B: nothing ever exists in
	// the test's own namespace.
	sh(t, "ip", "-n", bed.a.name, "link", "add", bed.ifA, "address", bedMACA, "type", "veth",
		"peer", "name", bed.ifB, "address", bedMACB, "netns", bed.b.name)
	for _, c := range []struct {
		ns          *netns
		ifname      string
		addr, addr6 string
	}{{bed.a, bed.ifA, "198.18.0.1/24", "2001:2::1/64"}, {bed.b, bed.ifB, "198.18.0.2/24", "2001:2::2/64"}} {
		sh(t, "ip", "-n", c.ns.name, "addr", "add", c.addr, "dev", c.ifname)
		sh(t, "ip", "-n", c.ns.name, "-6", "addr", "add", c.addr6, "dev", c.ifname, "nodad")
		sh(t, "ip", "-n", c.ns.name, "link", "set", c.ifname, "up")
	}
	// When B's end comes up the kernel turns the carrier on at both ends,
	// and B's transmit queue starts at once; but A's end, up since before
	// it had a carrier, starts transmitting only when the kernel's
	// link-watch work gets to it, under the RTNL lock, which can take a
	// second or more on a busy host (other namespaces being torn down).
	// Until then A's frames are dropped without an error to the sender
	// (the noop qdisc): the Responder answered the first ARP request and
	// the answer never left A (1 run in ~100 under load). Link-watch sets
	// A's operational state in the same step: wait until A is running.
	waitRunning(t, bed.a, bed.ifA)
	return bed
}

// waitRunning waits until the interface is operationally up
// (IFF_RUNNING), for at most wait.
func waitRunning(t *testing.T, ns *netns, ifname string) {
	t.Helper()
	var flags net.Flags
	running := testkit.Poll(wait, func() bool {
		var err error
		ns.do(t, func() {
			var ifi *net.Interface
			if ifi, err = net.InterfaceByName(ifname); err == nil {
				flags = ifi.Flags
			}
		})
		if err != nil {
			t.Fatalf("interface %s in %s: %v", ifname, ns.name, err)
		}
		return flags&net.FlagRunning != 0
	})
	if !running {
		t.Fatalf("%s in %s is not running %v after it came up (flags %v)", ifname, ns.name, wait, flags)
	}
}

// neigh returns the neighbor entry for addr in ns as ip prints it.
func neigh(t *testing.T, ns *netns, ifname, addr string) string {
	t.Helper()
	return strings.TrimSpace(sh(t, "ip", "-n", ns.name, "neigh", "show", addr, "dev", ifname))
}

// waitNeigh polls ns's neighbor table until addr's entry contains want,
// for at most wait. poke, when not nil, makes ns's kernel resolve addr:
// it is called first, and again whenever the entry has failed (the kernel
// gives up after three unanswered probes a second apart, which an answer
// delayed by a busy machine can miss, and does not ask again unprompted).
func waitNeigh(t *testing.T, ns *netns, ifname, addr, want string, poke func()) {
	t.Helper()
	if poke != nil {
		poke()
	}
	var got string
	ok := testkit.Poll(wait, func() bool {
		got = neigh(t, ns, ifname, addr)
		if strings.Contains(got, want) {
			return true
		}
		if poke != nil && strings.Contains(got, "FAILED") {
			poke()
		}
		return false
	})
	if !ok {
		t.Fatalf("neighbor %s in %s is %q after %v, want it to contain %q", addr, ns.name, got, wait, want)
	}
}

// testLog sends the package's logs to the test log.
func testLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
