package nstest

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestNames(t *testing.T) {
	n := Name("backend")
	if len(n) > 15 || !strings.HasPrefix(n, Marker+"bac") {
		t.Errorf("Name = %q", n)
	}
	if pid, ok := parseName(n); !ok || pid != os.Getpid() {
		t.Errorf("parseName(%q) = %d, %v", n, pid, ok)
	}
	for _, bad := range []string{"vt", "box123a", "vtbox", "vtabcd12a", "vt12a"} {
		if _, ok := parseName(bad); ok {
			t.Errorf("parseName(%q) accepted", bad)
		}
	}
}

// TestSweepStale leaves a namespace named for a dead process and checks
// that SweepStale removes it and nothing else.
func TestSweepStale(t *testing.T) {
	RequireRoot(t)
	// A pid that is surely not running: a child that has exited.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := Marker + "box" + strconv.Itoa(cmd.Process.Pid) + "z"
	mine := New(t, "box")
	Must(t, "ip", "netns", "add", dead)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", dead).Run() })
	// Other packages' tests run meanwhile, and one that kills a child
	// (e2e's TestTeardown) leaves dead-pid namespaces for a moment, which
	// SweepStale may take too: only dead's presence is certain.
	gone := SweepStale()
	if !slices.Contains(gone, dead) {
		t.Errorf("swept %v, want %s among them", gone, dead)
	}
	out := Must(t, "ip", "netns", "list")
	if !strings.Contains(out, mine.Name) {
		t.Errorf("a live test's namespace %s was swept", mine.Name)
	}
	if strings.Contains(out, dead) {
		t.Errorf("%s is still there", dead)
	}
}

// TestTentative: an IPv6 address added without nodad is caught, in the
// forms the tests write; IPv4, nodad, and other ip commands pass.
func TestTentative(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ip", "addr", "add", "2001:2::101/128", "dev", "lo"}, "2001:2::101/128"},
		{[]string{"ip", "netns", "exec", "vtx1a", "ip", "-6", "addr", "add", "2001:2::1/64", "dev", "eth0"}, "2001:2::1/64"},
		{[]string{"ip", "-n", "vtx1a", "address", "replace", "fe80::1/64", "dev", "eth0"}, "fe80::1/64"},
		{[]string{"ip", "a", "add", "2001:2::1", "dev", "eth0"}, "2001:2::1"},
		{[]string{"ip", "addr", "add", "2001:2::101/128", "dev", "lo", "nodad"}, ""},
		{[]string{"ip", "addr", "add", "198.18.0.1/24", "dev", "eth0"}, ""},
		{[]string{"ip", "addr", "del", "2001:2::101/128", "dev", "lo"}, ""},
		{[]string{"ip", "-6", "route", "add", "2001:2::/64", "via", "2001:2::fe"}, ""},
		{[]string{"ip", "link", "add", "veth0", "address", "02:00:00:00:00:01", "type", "veth"}, ""},
	} {
		if got := tentative(c.args); got != c.want {
			t.Errorf("tentative(%q) = %q, want %q", c.args, got, c.want)
		}
	}
}
