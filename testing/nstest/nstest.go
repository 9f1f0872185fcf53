package nstest

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/vipd/vipd/testing/testkit"
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

// T is what nstest needs of a test: testing.TB has it, and so can a
// program (the demo) that runs cleanups at exit.
type T interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

var seq atomic.Uint32

// Marker starts every name nstest makes, so that leftovers of a killed run
// can be recognised (see SweepStale).
const Marker = "vt"

// Name returns a name unique to this process and call, at most 15 bytes
// (an interface name's limit): the marker, prefix (up to 3 bytes), the pid
// and a sequence letter.
func Name(prefix string) string {
	if len(prefix) > 3 {
		prefix = prefix[:3]
	}
	return fmt.Sprintf("%s%s%d%c", Marker, prefix, os.Getpid(), 'a'+rune(seq.Add(1)%26))
}

// SweepStale deletes the namespaces that a test process which is no longer
// running left behind (killed before its cleanups ran): names that nstest
// made (marker, prefix, pid, letter) whose pid is gone. It returns their
// names. Namespaces of live processes, and every other namespace, are left
// alone.
func SweepStale() []string {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return nil
	}
	var gone []string
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		pid, ok := parseName(name)
		if !ok || pid == os.Getpid() || unix.Kill(pid, 0) == nil {
			continue
		}
		if exec.Command("ip", "netns", "del", name).Run() == nil {
			gone = append(gone, name)
		}
	}
	return gone
}

// parseName extracts the pid from a name Name made.
func parseName(name string) (int, bool) {
	if !strings.HasPrefix(name, Marker) || len(name) < len(Marker)+2 {
		return 0, false
	}
	s := name[len(Marker) : len(name)-1] // drop the marker and the letter
	i := 0
	for i < len(s) && (s[i] < '0' || s[i] > '9') {
		i++
	}
	if i == 0 || i > 3 || i == len(s) {
		return 0, false
	}
	pid := 0
	for _, c := range s[i:] {
		if c < '0' || c > '9' {
			return 0, false
		}
		pid = pid*10 + int(c-'0')
	}
	return pid, pid > 0
}

// NS is a network namespace created for one test.
type NS struct {
	Name string
}

// New creates a namespace with its loopback up; it is deleted at cleanup.
// A test (tb has Skipf) skips when the kernel refuses the namespace to a
// root process, as in a restricted container; any other failure fails it.
func New(tb T, prefix string) *NS {
	tb.Helper()
	n := &NS{Name: Name(prefix)}
	if out, err := exec.Command("ip", "netns", "add", n.Name).CombinedOutput(); err != nil {
		if s, ok := tb.(interface{ Skipf(string, ...any) }); ok && strings.Contains(string(out), "Operation not permitted") {
			s.Skipf("cannot create a network namespace (a restricted container?): %s", out)
		}
		tb.Fatalf("ip netns add %s: %v\n%s", n.Name, err, out)
	}
	tb.Cleanup(func() {
		exec.Command("ip", "netns", "del", n.Name).Run()
	})
	n.Must(tb, "ip", "link", "set", "lo", "up")
	return n
}

// Must runs a command on the host and fails the test if it fails. It
// refuses an `ip addr add` of an IPv6 address without nodad: such an
// address is tentative (a bind to it fails, nothing answers for it) until
// the kernel's duplicate address detection work runs, which a busy machine
// delays, so a test that uses it at once fails now and then.
func Must(tb T, args ...string) string {
	tb.Helper()
	if a := tentative(args); a != "" {
		tb.Fatalf("%s: add the IPv6 address %s with nodad, or it is unusable until the kernel's DAD work runs", strings.Join(args, " "), a)
	}
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		tb.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// tentative returns the IPv6 address that args, an ip command, add or
// replace without nodad, or "".
func tentative(args []string) string {
	for i := 0; i+1 < len(args); i++ {
		if (args[i] != "addr" && args[i] != "address" && args[i] != "a") || (args[i+1] != "add" && args[i+1] != "replace") {
			continue
		}
		rest := args[i+2:]
		if slices.Contains(rest, "nodad") {
			return ""
		}
		for _, a := range rest {
			if p, err := netip.ParsePrefix(a); err == nil && p.Addr().Is6() && !p.Addr().Is4In6() {
				return a
			}
			if ip, err := netip.ParseAddr(a); err == nil && ip.Is6() && !ip.Is4In6() {
				return a
			}
		}
	}
	return ""
}

// Must runs a command inside the namespace and fails the test if it fails.
func (n *NS) Must(tb T, args ...string) string {
	tb.Helper()
	return Must(tb, append([]string{"ip", "netns", "exec", n.Name}, args...)...)
}

// Cmd returns a command that runs inside the namespace.
func (n *NS) Cmd(args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.Name}, args...)...)
}

// Veth creates a veth pair with one end in a (named an) and the other in b
// (named bn), both up and running; deleting a's end at cleanup deletes the
// pair.
func Veth(tb T, a *NS, an string, b *NS, bn string) {
	tb.Helper()
	VethWith(tb, a, an, b, bn, VethOptions{})
}

// VethOptions are a veth pair's properties beyond its ends' names.
type VethOptions struct {
	// Rename makes the pair under unique names, then renames the ends to
	// theirs: for names that may exist elsewhere, like eth0.
	Rename bool
	// Queues is the number of queues of both ends, each way (numtxqueues
	// and numrxqueues); 0 leaves the kernel's default, one.
	Queues int
	// MACA and MACB are the hardware addresses of a's and b's ends; ""
	// leaves a random one.
	MACA, MACB string
}

// VethWith is Veth with options.
func VethWith(tb T, a *NS, an string, b *NS, bn string, o VethOptions) {
	tb.Helper()
	ca, cb := an, bn // the names the pair is created under
	if o.Rename {
		ca, cb = Name("va"), Name("vb")
	}
	end := func(name, mac string, ns *NS) []string {
		args := []string{name}
		if mac != "" {
			args = append(args, "address", mac)
		}
		args = append(args, "netns", ns.Name)
		if o.Queues != 0 {
			q := strconv.Itoa(o.Queues)
			args = append(args, "numtxqueues", q, "numrxqueues", q)
		}
		return args
	}
	args := append([]string{"ip", "link", "add"}, end(ca, o.MACA, a)...)
	args = append(append(args, "type", "veth", "peer", "name"), end(cb, o.MACB, b)...)
	Must(tb, args...)
	tb.Cleanup(func() {
		for _, name := range slices.Compact([]string{an, ca}) {
			exec.Command("ip", "-n", a.Name, "link", "del", name).Run()
		}
	})
	if o.Rename {
		a.Must(tb, "ip", "link", "set", ca, "name", an)
		b.Must(tb, "ip", "link", "set", cb, "name", bn)
	}
	a.Must(tb, "ip", "link", "set", an, "up")
	b.Must(tb, "ip", "link", "set", bn, "up")
	a.WaitRunning(tb, an)
	b.WaitRunning(tb, bn)
}

// VethNamed creates a veth pair between a and b whose ends are called an and
// bn inside their namespaces (names that may exist elsewhere, like eth0):
// VethWith with Rename.
func VethNamed(tb T, a *NS, an string, b *NS, bn string) {
	tb.Helper()
	VethWith(tb, a, an, b, bn, VethOptions{Rename: true})
}

// WaitRunning waits, at most 30 s, until interface ifname is
// operationally up. When a veth's second end comes up the kernel turns
// the carrier on at both ends, but the end that was up first starts
// transmitting only when the kernel's link-watch work gets to it, under
// the RTNL lock, which can take a second on a busy host; until then its
// frames are dropped without an error to the sender. Link-watch sets the
// operational state in the same step.
func (n *NS) WaitRunning(tb T, ifname string) {
	tb.Helper()
	var out []byte
	var err error
	if !testkit.Poll(testkit.Patience, func() bool {
		out, err = exec.Command("ip", "-n", n.Name, "-o", "link", "show", "dev", ifname).CombinedOutput()
		return err == nil && strings.Contains(string(out), " state UP ")
	}) {
		tb.Fatalf("%s in %s not running after %v: %s (%v)", ifname, n.Name, testkit.Patience, out, err)
	}
}

// Sysctl sets a net.* sysctl inside the namespace (they are per
// namespace), by writing /proc/sys from a shell running in it.
func (n *NS) Sysctl(tb T, key, value string) {
	tb.Helper()
	path := "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
	n.Must(tb, "sh", "-c", "echo "+value+" > "+path)
}
