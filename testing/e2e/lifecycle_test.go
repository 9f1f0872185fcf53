package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vipd/vipd/testing/nstest"
	"github.com/vipd/vipd/testing/testbed"
	"github.com/vipd/vipd/testing/testkit"
)

// TestReload: SIGHUP with a new backend keeps existing connections on
// their backends (a long transfer survives) and brings the new backend
// into rotation; SIGHUP with a broken file changes nothing.
func TestReload(t *testing.T) {
	requireE2E(t)
	bed := testbed.New(t, testbed.Options{Backends: 4})
	e := &env{t: t, bed: bed, c: bed.HTTPClient(60 * time.Second)}
	three := testbed.ConfigOptions{Backends: 3}
	e.v = bed.StartVIPD(bed.Config(three))
	be := make(chan string, 2)
	done := make(chan error, 2)
	go func() { done <- e.slowDownload(natURL, 24<<20, 8<<20, be) }()
	go func() { done <- e.slowDownload(dsrURL, 24<<20, 8<<20, be) }()
	<-be
	<-be
	// The reload also adds a VIP: vipd must announce it (gratuitous ARP),
	// which the router records since it accepts unsolicited ARP here.
	bed.Router.Sysctl(t, "net.ipv4.conf.r1.arp_accept", "1")
	const newVIP = "198.18.0.110"
	extra := "[[vip]]\nname = \"added\"\naddress = \"" + newVIP + "\"\nport = 80\n[vip.healthcheck]\ntype = \"none\"\n[[vip.backend]]\naddress = \"198.18.1.12\"\nport = 80\n"
	if err := e.v.Reload(bed.Config(testbed.ConfigOptions{Extra: extra}), "ok"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, patience, "the added VIP announced: an ARP entry for "+newVIP+" at the router", func() bool {
		return strings.Contains(bed.Router.Must(t, "ip", "neigh", "show", newVIP), "lladdr")
	})
	if got := e.names("http://"+newVIP, 5); got["backend2"] != 5 {
		t.Errorf("the added VIP answered %v, want backend2 only", got)
	}
	counts := e.names(natURL, 100)
	if counts["backend4"] == 0 {
		t.Errorf("the added backend got none of 100 new connections: %v", counts)
	}
	if err := e.v.Reload("[dataplane]\ningress = \"eth0\"\nthis is not toml\n", "error"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.download(natURL, 1<<20); err != nil {
		t.Errorf("forwarding after a refused reload: %v", err)
	}
	for i := 0; i < 2; i++ {
		if err := <-done; err != nil {
			t.Errorf("a transfer did not survive the reloads: %v", err)
		}
	}
	if !strings.Contains(e.v.Log(), "reload refused") {
		t.Errorf("the refused reload was not logged")
	}
}

// TestRestart: vipd stopped and started again. Flows started before keep
// their backend, because Maglev with the same configuration maps every flow
// the same way — for established TCP connections the transfer survives the
// restart (DSR and NAT: NAT replies are translated without state).
func TestRestart(t *testing.T) {
	e := setup(t, testbed.Options{}, testbed.ConfigOptions{})
	be := make(chan string, 2)
	done := make(chan error, 2)
	var got [2]atomic.Int64
	go func() { done <- e.slowDownloadCounted(dsrURL, 16<<20, 4<<20, be, &got[0]) }()
	go func() { done <- e.slowDownloadCounted(natURL, 16<<20, 4<<20, be, &got[1]) }()
	<-be
	<-be
	// The restart lands mid-transfer: once each transfer has 1 of its 16
	// MiB (a quarter second's worth, however long a busy machine takes
	// for it).
	for i := range got {
		waitFor(t, patience, fmt.Sprintf("transfer %d's first MiB", i), func() bool { return got[i].Load() >= 1<<20 })
	}
	if err := e.v.Stop(); err != nil {
		t.Fatal(err)
	}
	if out := e.bed.Box.Must(t, "ip", "-o", "link"); strings.Contains(out, "xdp") {
		t.Errorf("an XDP program is still attached after vipd stopped:\n%s", out)
	}
	e.v = e.bed.StartVIPD(e.bed.Config(testbed.ConfigOptions{}))
	for i := 0; i < 2; i++ {
		if err := <-done; err != nil {
			t.Errorf("a transfer did not survive the restart: %v", err)
		}
	}
}

// TestOwnTraffic: the box's own address keeps answering pings and TCP while
// vipd runs (the XDP program passes everything that is not vipd's).
func TestOwnTraffic(t *testing.T) {
	for _, io := range drivers {
		t.Run(io, func(t *testing.T) {
			e := setup(t, testbed.Options{}, testbed.ConfigOptions{IO: io})
			if n, err := testbed.Ping(e.bed.Client, testbed.BoxIngress, 3, 10*time.Second); n != 3 {
				t.Errorf("ping to the box: %d of 3 answered (%v)", n, err)
			}
			var ln net.Listener
			if err := e.bed.Box.Do(func() (err error) {
				ln, err = net.Listen("tcp", testbed.BoxIngress.String()+":2222")
				return
			}); err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err == nil {
					c.Write([]byte("box\n"))
					c.Close()
				}
			}()
			dial := testbed.Dialer(e.bed.Client)
			ctx, cancel := context.WithTimeout(context.Background(), patience)
			defer cancel()
			c, err := dial(ctx, "tcp", testbed.BoxIngress.String()+":2222")
			if err != nil {
				t.Fatalf("TCP to the box's own address: %v", err)
			}
			buf := make([]byte, 8)
			n, _ := c.Read(buf)
			c.Close()
			if string(buf[:n]) != "box\n" {
				t.Errorf("got %q from the box", buf[:n])
			}
			// And vipd still serves the VIP.
			e.names(natURL, 5)
		})
	}
}

// TestLinkFlap: a port of the box that goes down and comes back does not
// stop vipd. The egress goes down while clients keep connecting, so that
// vipd transmits into a link that is down; once it is back, vipd (the
// same process) serves new flows again.
func TestLinkFlap(t *testing.T) {
	for _, io := range drivers {
		t.Run(io, func(t *testing.T) {
			e := setup(t, testbed.Options{}, testbed.ConfigOptions{IO: io})
			e.names(natURL, 5)
			pid := e.v.PID()
			e.bed.Box.Must(t, "ip", "link", "set", "eth1", "down")
			short := e.bed.HTTPClient(300 * time.Millisecond)
			for i := 0; i < 5; i++ {
				if _, err := testbed.Get(context.Background(), short, natURL); err == nil {
					t.Errorf("a request through a box whose egress is down was answered")
				}
			}
			e.bed.Box.Must(t, "ip", "link", "set", "eth1", "up")
			// Health checks failed while the link was down: wait for them
			// to pass again, then every request must be answered. (A
			// request that should be answered gets more than short's
			// 300 ms: a busy machine can take longer.)
			retry := e.bed.HTTPClient(5 * time.Second)
			waitFor(t, patience, "a request answered after the egress came back", func() bool {
				_, err := testbed.Get(context.Background(), retry, natURL)
				return err == nil
			})
			e.names(natURL, 10)
			if err := syscall.Kill(pid, 0); err != nil || e.v.PID() != pid {
				t.Errorf("vipd (pid %d) did not survive the flap: %v", pid, err)
			}
			kick := e.metric("vipd_driver_events_total", "event", "tx_kick_errors") + e.metric("vipd_driver_events_total", "event", "tx_errors")
			if kick == 0 {
				t.Errorf("no failed transmit counted while the egress was down")
			}
		})
	}
}

// TestTeardown: a run that fails leaves nothing behind, and one killed
// outright is swept by the next run. The failing run is a child test
// process: its namespaces carry its pid.
func TestTeardown(t *testing.T) {
	if os.Getenv("VIPD_TEARDOWN_CHILD") != "" {
		return
	}
	requireE2E(t)
	var killed string // the pid of the child killed outright
	for _, kill := range []bool{false, true} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestTeardownChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "VIPD_TEARDOWN_CHILD=1")
		if kill {
			cmd.Env = append(cmd.Env, "VIPD_TEARDOWN_HANG=1")
		}
		out, _ := startAndMaybeKill(t, cmd, kill)
		pid := strconv.Itoa(cmd.Process.Pid)
		if !kill && !strings.Contains(out, "deliberate failure") {
			t.Fatalf("child did not fail as planned:\n%s", out)
		}
		if kill {
			nstest.SweepStale()
			killed = pid
		}
		left := nstest.Must(t, "ip", "netns", "list")
		for _, l := range strings.Split(left, "\n") {
			if strings.HasPrefix(l, nstest.Marker) && strings.Contains(l, pid) {
				t.Errorf("killed=%v: namespace left behind: %s", kill, l)
			}
		}
		if vipdAlive(pid) {
			t.Errorf("killed=%v: a vipd started by the child still runs", kill)
		}
	}
	// And a new run starts clean, and sweeps the killed child's files.
	e := setup(t, testbed.Options{}, testbed.ConfigOptions{})
	e.names(natURL, 3)
	for _, kind := range []string{"vipd-bed", "vipd-bed-bin"} {
		if left, _ := filepath.Glob(filepath.Join(os.TempDir(), kind+"-"+killed+"-*")); len(left) > 0 {
			t.Errorf("the killed child's directories are still there: %v", left)
		}
	}
}

func TestTeardownChild(t *testing.T) {
	if os.Getenv("VIPD_TEARDOWN_CHILD") == "" {
		t.Skip("run by TestTeardown")
	}
	e := setup(t, testbed.Options{}, testbed.ConfigOptions{})
	e.names(natURL, 3)
	fmt.Println("bed up")
	if os.Getenv("VIPD_TEARDOWN_HANG") != "" {
		time.Sleep(time.Minute) // killed by the parent
	}
	t.Fatal("deliberate failure")
}

// startAndMaybeKill runs cmd; with kill, it waits for "bed up" then
// SIGKILLs it (no cleanup runs), and kills the vipd it started.
func startAndMaybeKill(t *testing.T, cmd *exec.Cmd, kill bool) (string, error) {
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !kill {
		err := cmd.Wait()
		return out.String(), err
	}
	testkit.Poll(60*time.Second, func() bool { return strings.Contains(out.String(), "bed up") })
	cmd.Process.Kill()
	cmd.Wait()
	// Its children (vipd, backends, decapsulators) were started with
	// Setpgid unset, so they outlive it: find them by their namespaces
	// and kill them by PID, as a supervisor would.
	pid := strconv.Itoa(cmd.Process.Pid)
	for _, ns := range strings.Split(nstest.Must(t, "ip", "netns", "list"), "\n") {
		name, _, _ := strings.Cut(ns, " ")
		if strings.HasPrefix(name, nstest.Marker) && strings.Contains(name, pid) {
			for _, p := range strings.Fields(nstest.Must(t, "ip", "netns", "pids", name)) {
				if n, err := strconv.Atoi(p); err == nil {
					if proc, err := os.FindProcess(n); err == nil {
						proc.Kill()
					}
				}
			}
		}
	}
	// SIGKILL is asynchronous: wait until none of them is left in a
	// namespace of the child's (the caller checks that none is).
	testkit.Poll(patience, func() bool { return !vipdAlive(pid) })
	return out.String(), nil
}

// vipdAlive reports whether a process running the bed's vipd binary has
// the child's pid in its namespace (by name).
func vipdAlive(childPid string) bool {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, ns := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(ns, " ")
		if strings.HasPrefix(name, nstest.Marker) && strings.Contains(name, childPid) {
			if p, _ := exec.Command("ip", "netns", "pids", name).Output(); len(strings.TrimSpace(string(p))) > 0 {
				return true
			}
		}
	}
	return false
}

// TestAFPacketHostCheck: in AF_PACKET mode the kernel gets a copy of every
// frame, so vipd refuses to start while the box forwards IP, and says how
// to fix it.
func TestAFPacketHostCheck(t *testing.T) {
	requireE2E(t)
	bed := testbed.New(t, testbed.Options{})
	bed.Box.Sysctl(t, "net.ipv4.ip_forward", "1")
	out, err := bed.RunVIPDExpectExit(bed.Config(testbed.ConfigOptions{IO: "afpacket"}), 2*patience)
	if err == nil {
		t.Fatalf("vipd started in AF_PACKET mode with forwarding on:\n%s", out)
	}
	if !strings.Contains(out, "IPv4 forwarding is on") || !strings.Contains(out, "sysctl -w net.ipv4.ip_forward=0") {
		t.Errorf("the refusal does not say why and how to fix it:\n%s", out)
	}
}
