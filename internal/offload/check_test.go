package offload

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/vipd/vipd/testing/nstest"
	"github.com/vipd/vipd/testing/testkit"
	"golang.org/x/sys/unix"
)

// The privileged tests build, per case, a "box" namespace (where vipd
// would run, and where Check is called) and whatever the case needs around
// it, then compare Check's report with what the test built.

// setTx sets TX checksumming on ifname inside ns with SetTxChecksum and,
// when ethtool(8) is installed, checks that ethtool sees the same.
func setTx(t *testing.T, ns *nstest.NS, ifname string, on bool) {
	t.Helper()
	if err := ns.Do(func() error { return SetTxChecksum(ifname, on) }); err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("ethtool"); err != nil {
		return
	}
	out := ns.Must(t, "ethtool", "-k", ifname)
	want := "tx-checksumming: off"
	if on {
		want = "tx-checksumming: on"
	}
	if !strings.Contains(out, want) {
		t.Fatalf("after SetTxChecksum(%s, %v), ethtool -k says:\n%s", ifname, on, out)
	}
}

// index returns ifname's index inside ns.
func index(t *testing.T, ns *nstest.NS, ifname string) int {
	t.Helper()
	var idx int
	err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err == nil {
			idx = ifi.Index
		}
		return err
	})
	if err != nil {
		t.Fatalf("index of %s in %s: %v", ifname, ns.Name, err)
	}
	return idx
}

// linkNSID returns the peer namespace's id that ip(8) shows for ifname in
// ns, as an oracle for Report.PeerNetNSID.
func linkNSID(t *testing.T, ns *nstest.NS, ifname string) int {
	t.Helper()
	out := nstest.Must(t, "ip", "-n", ns.Name, "-j", "link", "show", "dev", ifname)
	var links []struct {
		NSID *int `json:"link_netnsid"`
	}
	if err := json.Unmarshal([]byte(out), &links); err != nil || len(links) != 1 || links[0].NSID == nil {
		t.Fatalf("no link_netnsid for %s in %s (%v):\n%s", ifname, ns.Name, err, out)
	}
	return *links[0].NSID
}

// otherNS makes a namespace with a veth pair between box and it, both ends
// called eth0 (so that a peer looked up in the wrong namespace would be
// found, under the same name and likely the same index, and give the
// wrong answer). box's end gets the opposite TX checksum setting from the
// peer's. It returns the report Check should give, before any
// namespace-specific fields.
func otherNS(t *testing.T, box *nstest.NS, peerTx bool) (*nstest.NS, Report) {
	t.Helper()
	peer := nstest.New(t, "pr")
	nstest.VethNamed(t, box, "eth0", peer, "eth0")
	t.Cleanup(func() { exec.Command("ip", "-n", box.Name, "link", "del", "eth0").Run() })
	setTx(t, box, "eth0", !peerTx)
	setTx(t, peer, "eth0", peerTx)
	return peer, Report{
		Interface:      "eth0",
		IsVeth:         true,
		PeerIndex:      index(t, peer, "eth0"),
		PeerNetNSID:    linkNSID(t, box, "eth0"),
		PeerReachable:  true,
		PeerName:       "eth0",
		PeerTxChecksum: peerTx,
	}
}

func sameNS(t *testing.T, box *nstest.NS, peerTx bool) (string, Report) {
	t.Helper()
	a, b := nstest.Name("va"), nstest.Name("vb")
	nstest.Veth(t, box, a, box, b)
	setTx(t, box, a, !peerTx)
	setTx(t, box, b, peerTx)
	return a, Report{
		Interface:      a,
		IsVeth:         true,
		PeerIndex:      index(t, box, b),
		PeerNetNSID:    -1,
		PeerReachable:  true,
		PeerName:       b,
		PeerTxChecksum: peerTx,
	}
}

func TestCheck(t *testing.T) {
	nstest.RequireRoot(t)
	var self unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &self); err != nil {
		t.Fatal(err)
	}
	// However Check and the helpers switch threads, none is left elsewhere.
	defer threadsIn(t, self)
	cases := []struct {
		name string
		// setup builds the case around box and returns the interface to
		// check and the report expected (Unreachable: any non-empty text).
		setup func(t *testing.T, box *nstest.NS) (string, Report)
	}{
		{"loopback", func(t *testing.T, box *nstest.NS) (string, Report) {
			return "lo", Report{Interface: "lo", PeerNetNSID: -1}
		}},
		{"bridge", func(t *testing.T, box *nstest.NS) (string, Report) {
			br := nstest.Name("br")
			box.Must(t, "ip", "link", "add", br, "type", "bridge")
			t.Cleanup(func() { exec.Command("ip", "-n", box.Name, "link", "del", br).Run() })
			return br, Report{Interface: br, PeerNetNSID: -1}
		}},
		{"same namespace, peer tx on", func(t *testing.T, box *nstest.NS) (string, Report) {
			return sameNS(t, box, true)
		}},
		{"same namespace, peer tx off", func(t *testing.T, box *nstest.NS) (string, Report) {
			return sameNS(t, box, false)
		}},
		{"named namespace, peer tx on", func(t *testing.T, box *nstest.NS) (string, Report) {
			peer, want := otherNS(t, box, true)
			want.PeerNetNS = peer.Name
			return "eth0", want
		}},
		{"named namespace, peer tx off", func(t *testing.T, box *nstest.NS) (string, Report) {
			peer, want := otherNS(t, box, false)
			want.PeerNetNS = peer.Name
			return "eth0", want
		}},
		{"process's namespace, peer tx on", func(t *testing.T, box *nstest.NS) (string, Report) {
			// A container's namespace: no name, a process in it.
			peer, want := otherNS(t, box, true)
			pid := holdByProcess(t, peer)
			want.PeerNetNS = "/proc/" + strconv.Itoa(pid) + "/ns/net"
			return "eth0", want
		}},
		{"unreachable namespace", func(t *testing.T, box *nstest.NS) (string, Report) {
			// No name and no process: only this test's open descriptor
			// keeps the namespace alive, as with a namespace bound to a
			// file outside /run/netns ("unshare --net=FILE").
			peer, want := otherNS(t, box, true)
			holdByFD(t, peer)
			want.PeerReachable, want.PeerName, want.PeerTxChecksum = false, "", false
			want.Unreachable = "any"
			return "eth0", want
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			box := nstest.New(t, "box")
			ifname, want := tc.setup(t, box)
			var got Report
			if err := box.Do(func() (err error) { got, err = Check(ifname); return err }); err != nil {
				t.Fatalf("Check(%s): %v", ifname, err)
			}
			if (got.Unreachable != "") != (want.Unreachable != "") {
				t.Errorf("Unreachable = %q", got.Unreachable)
			}
			cmp := got
			cmp.Unreachable, want.Unreachable = "", ""
			if cmp != want {
				t.Errorf("Check(%s)\n got %+v\nwant %+v", ifname, got, want)
			}
			w := got.Warning()
			if (w == "") != got.OK() {
				t.Errorf("OK() = %v but Warning() = %q", got.OK(), w)
			}
			t.Logf("warning: %q", w)
		})
	}
}

// holdByProcess starts a process in ns, then removes ns's name, so that
// only the process keeps it. It returns the process's pid; the process is
// killed at cleanup.
func holdByProcess(t *testing.T, ns *nstest.NS) int {
	t.Helper()
	var want unix.Stat_t
	if err := unix.Stat("/run/netns/"+ns.Name, &want); err != nil {
		t.Fatal(err)
	}
	cmd := ns.Cmd("sleep", "60") // ip netns exec NAME sleep: one process, exec'd in place
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	path := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/ns/net"
	testkit.Eventually(t, testkit.Patience, fmt.Sprintf("process %d to enter %s", cmd.Process.Pid, ns.Name), func() bool {
		var st unix.Stat_t
		return unix.Stat(path, &st) == nil && st.Dev == want.Dev && st.Ino == want.Ino
	})
	nstest.Must(t, "ip", "netns", "del", ns.Name)
	return cmd.Process.Pid
}

// holdByFD opens ns and removes its name, so that only the test's
// descriptor keeps it; the descriptor is closed at cleanup.
func holdByFD(t *testing.T, ns *nstest.NS) {
	t.Helper()
	f, err := os.Open("/run/netns/" + ns.Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	nstest.Must(t, "ip", "netns", "del", ns.Name)
}

func TestCheckNoSuchInterface(t *testing.T) {
	nstest.RequireRoot(t)
	box := nstest.New(t, "box")
	err := box.Do(func() error { _, err := Check("nosuch0"); return err })
	if !errors.Is(err, unix.ENODEV) {
		t.Errorf("Check(nosuch0) = %v, want an error wrapping ENODEV", err)
	}
}
