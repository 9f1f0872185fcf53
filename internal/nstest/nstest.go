// Package nstest gives privileged tests throwaway network namespaces and
// veth pairs. Every name is unique per process and run, everything created
// is deleted in t.Cleanup — by exact name, also when the test fails — and
// tests that need root skip with a clear message when not root.
//
// Addresses used with it must come from 198.18.0.0/15 (IPv6 2001:2::/48):
// traffic never leaves the namespaces the test created.
package nstest

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// RequireRoot skips the test unless it runs as root with the ip tool.
func RequireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("needs root (network namespaces, veth, XDP): run as root, as CI does")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		tb.Skip("needs the ip tool (iproute2)")
	}
}

var seq atomic.Uint32

// Name returns a name unique to this process and call, at most 15 bytes
// (an interface name's limit): prefix (up to 5 bytes) + pid + sequence.
func Name(prefix string) string {
	if len(prefix) > 5 {
		prefix = prefix[:5]
	}
	return fmt.Sprintf("%s%d%c", prefix, os.Getpid()%1000000, 'a'+rune(seq.Add(1)%26))
}

// NS is a network namespace created for one test.
type NS struct {
	Name string
}

// New creates a namespace with its loopback up; it is deleted at cleanup.
func New(tb testing.TB, prefix string) *NS {
	tb.Helper()
	n := &NS{Name: Name(prefix)}
	Must(tb, "ip", "netns", "add", n.Name)
	tb.Cleanup(func() {
		exec.Command("ip", "netns", "del", n.Name).Run()
	})
	n.Must(tb, "ip", "link", "set", "lo", "up")
	return n
}

// Must runs a command on the host and fails the test if it fails.
func Must(tb testing.TB, args ...string) string {
	tb.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		tb.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Must runs a command inside the namespace and fails the test if it fails.
func (n *NS) Must(tb testing.TB, args ...string) string {
	tb.Helper()
	return Must(tb, append([]string{"ip", "netns", "exec", n.Name}, args...)...)
}

// Cmd returns a command that runs inside the namespace.
func (n *NS) Cmd(args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.Name}, args...)...)
}

// Veth creates a veth pair with one end in a (named an) and the other in b
// (named bn), both up; deleting a's end at cleanup deletes the pair.
func Veth(tb testing.TB, a *NS, an string, b *NS, bn string) {
	tb.Helper()
	Must(tb, "ip", "link", "add", an, "netns", a.Name, "type", "veth", "peer", "name", bn, "netns", b.Name)
	tb.Cleanup(func() { exec.Command("ip", "-n", a.Name, "link", "del", an).Run() })
	a.Must(tb, "ip", "link", "set", an, "up")
	b.Must(tb, "ip", "link", "set", bn, "up")
}

// Do runs f on a locked OS thread switched into the namespace and switches
// back afterwards. Sockets f creates stay in the namespace and may be used
// from any goroutine after Do returns.
func (n *NS) Do(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return err
	}
	defer orig.Close()
	target, err := os.Open("/var/run/netns/" + n.Name)
	if err != nil {
		return err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("setns %s: %w", n.Name, err)
	}
	ferr := f()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread is in a foreign namespace and cannot be trusted:
		// never unlock it, so the runtime discards it when this goroutine
		// exits.
		runtime.LockOSThread()
		return fmt.Errorf("setns back: %w (thread abandoned)", err)
	}
	return ferr
}
