package nstest

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
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

// TestDo: f runs inside the namespace, the caller's thread never leaves
// its own, and Go reports f's error when f returns.
func TestDo(t *testing.T) {
	RequireRoot(t)
	n := New(t, "do")
	want := nsInode(t, "/var/run/netns/"+n.Name)
	own := nsInode(t, "/proc/thread-self/ns/net")
	var inside uint64
	if err := n.Do(func() error { inside = nsInode(t, "/proc/thread-self/ns/net"); return nil }); err != nil {
		t.Fatal(err)
	}
	if inside != want || inside == own {
		t.Errorf("f ran in namespace %d, want %d (the caller's is %d)", inside, want, own)
	}
	if got := nsInode(t, "/proc/thread-self/ns/net"); got != own {
		t.Errorf("after Do the caller is in namespace %d, want its own %d", got, own)
	}
	boom := errors.New("boom")
	if err := <-n.Go(func() error { return boom }); err != boom {
		t.Errorf("Go's error = %v, want %v", err, boom)
	}
	if err := (&NS{Name: Marker + "none"}).Do(func() error { return nil }); err == nil {
		t.Error("Do in a namespace that does not exist: no error")
	}
}

func nsInode(t *testing.T, path string) uint64 {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Errorf("stat %s: %v", path, err)
	}
	return st.Ino
}

// TestVethWith: the ends get their names (renamed from unique ones),
// hardware addresses and queues, and come up.
func TestVethWith(t *testing.T) {
	RequireRoot(t)
	a, b := New(t, "va"), New(t, "vb")
	VethWith(t, a, "eth0", b, "eth1", VethOptions{Rename: true, Queues: 2, MACA: "02:00:5e:0a:00:01", MACB: "02:00:5e:0b:00:01"})
	for _, c := range []struct {
		ns        *NS
		name, mac string
	}{{a, "eth0", "02:00:5e:0a:00:01"}, {b, "eth1", "02:00:5e:0b:00:01"}} {
		ifi := c.ns.Interface(t, c.name)
		if ifi.HardwareAddr.String() != c.mac || ifi.Flags&net.FlagUp == 0 {
			t.Errorf("%s: %s, flags %v; want %s, up", c.name, ifi.HardwareAddr, ifi.Flags, c.mac)
		}
		if q := c.ns.Must(t, "ls", "/sys/class/net/"+c.name+"/queues"); len(strings.Fields(q)) != 4 {
			t.Errorf("%s's queues: %q, want rx-0, rx-1, tx-0, tx-1", c.name, q)
		}
	}
}

// TestServeTCP: the listener is inside the namespace (on its loopback),
// and each connection gets serve.
func TestServeTCP(t *testing.T) {
	RequireRoot(t)
	n := New(t, "srv")
	addr := netip.MustParseAddrPort("127.0.0.1:8080")
	n.ServeTCP(t, net.ListenConfig{}, addr, func(c net.Conn) {
		defer c.Close()
		c.Write([]byte("hello"))
	})
	for range 2 {
		got := Make(t, n, "dial", func() (string, error) {
			c, err := net.Dial("tcp", addr.String())
			if err != nil {
				return "", err
			}
			defer c.Close()
			b, err := io.ReadAll(c)
			return string(b), err
		})
		if got != "hello" {
			t.Errorf("read %q, want hello", got)
		}
	}
}
