package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/fleet"
	"github.com/vipd/vipd/testing/etcdtest"
	"github.com/vipd/vipd/testing/testbed"
	"github.com/vipd/vipd/testing/testkit"
)

// fleetPrefix is the test fleet's prefix in etcd.
const fleetPrefix = "/vipd/fleets/e2e/"

// fleetEnv is the ECMP bed whose boxes follow a fleet in a 3-member etcd,
// which they reach through a proxy each (etcdtest.Proxy): the members
// listen on the test's loopback, the boxes are namespaces.
type fleetEnv struct {
	*ecmpEnv
	etcd    *etcdtest.Cluster
	cli     *clientv3.Client
	proxies []*etcdtest.Proxy
	// local is the operator's file, in the test's namespace, whose
	// [fleet] the vipd commands read.
	local string
}

// shared is the fleet's document for co: the bed's VIPs, as every box's
// file would have them, without the boxes' own encap_source.
func (e *fleetEnv) shared(co testbed.ConfigOptions) string {
	_, shared := testbed.SplitFleet(e.bed.Config(co))
	return shared
}

// fleetKeys is the [fleet] table of box (the operator's when "").
func (e *fleetEnv) fleetKeys(box, cache string) string {
	return testbed.FleetTable(e.etcd.Endpoints(), fleetPrefix, box, cache)
}

// newFleetEnv builds the ECMP bed and etcd, pushes co's VIPs as the
// fleet's document, and starts every box on a file with no VIP of its
// own.
func newFleetEnv(t *testing.T, co testbed.ConfigOptions) *fleetEnv {
	e := &fleetEnv{ecmpEnv: newECMPBed(t, testbed.Options{Backends: 4}, co), etcd: etcdtest.Start(t, 3)}
	e.cli = e.etcd.Client(t)
	for _, box := range e.bed.Boxes {
		e.proxies = append(e.proxies, e.etcd.ProxyInto(t, box))
	}
	e.local = filepath.Join(t.TempDir(), "operator.toml")
	if err := os.WriteFile(e.local, []byte("[dataplane]\ningress = \"eth0\"\n"+e.fleetKeys("", "")), 0o600); err != nil {
		t.Fatal(err)
	}
	e.push(t, co)
	e.boxFile = func(i int) string {
		local, _ := testbed.SplitFleet(e.bed.BoxConfig(i, e.co, ""))
		cache := e.bed.BoxPath(i, "/var/lib/vipd/fleet.cache")
		if err := os.MkdirAll(filepath.Dir(cache), 0o755); err != nil {
			t.Fatal(err)
		}
		return local + bgpKeys(ecmpBGP) + e.fleetKeys(fmt.Sprintf("box%d", i+1), cache)
	}
	e.startAll(t)
	return e
}

// push writes co's document as the fleet's, over whatever it holds, and
// returns the revision written.
func (e *fleetEnv) push(t *testing.T, co testbed.ConfigOptions) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	_, mod, err := fleet.Pull(ctx, e.cli, fleetPrefix)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := fleet.Push(ctx, e.cli, fleetPrefix, []byte(e.shared(co)), mod)
	if err != nil {
		t.Fatal(err)
	}
	e.co = co
	return rev
}

// fleetOf returns box i's view of the fleet.
func (e *fleetEnv) fleetOf(t *testing.T, i int) *api.FleetState {
	t.Helper()
	st, err := e.boxes[i].State()
	if err != nil {
		t.Fatalf("box %d: %v", i+1, err)
	}
	if st.Fleet == nil {
		t.Fatalf("box %d shows no fleet", i+1)
	}
	return st.Fleet
}

// waitBoxes waits until every box's view satisfies ok, and returns how
// long that took.
func (e *fleetEnv) waitBoxes(t *testing.T, what string, ok func(*api.FleetState) bool) time.Duration {
	t.Helper()
	start := time.Now()
	waitFor(t, patience, what, func() bool {
		for i := range e.boxes {
			if !ok(e.fleetOf(t, i)) {
				return false
			}
		}
		return true
	})
	return time.Since(start)
}

// waitBoxKeys waits until every box's key in etcd says it runs rev or
// later: what vipd fleet status and -wait read.
func (e *fleetEnv) waitBoxKeys(t *testing.T, rev int64) {
	t.Helper()
	var boxes []fleet.BoxStatus
	if !testkit.Poll(patience, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		boxes, err = fleet.Boxes(ctx, e.cli, fleetPrefix)
		if err != nil || len(boxes) != len(e.boxes) {
			return false
		}
		for _, b := range boxes {
			if b.Revision < rev || b.Stale {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("the box keys do not all say revision %d: %+v", rev, boxes)
	}
}

// vipd runs the vipd command with args (the operator's), and returns its
// output and exit status.
func (e *fleetEnv) vipd(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	out, err := exec.CommandContext(ctx, e.bed.Bin.VIPD, args...).CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("vipd %s: %v", strings.Join(args, " "), err)
	}
	return string(out), code
}

// TestFleet: three boxes behind BIRD follow one fleet in a 3-member etcd
// while 150 connections stream through the DSR VIP: a push reaches every
// box and breaks nothing; a fleet drain with -wait returns once every
// box runs it and no box gives the backend a new flow after; with
// etcd's quorum lost every box is stale, keeps its routes and breaks
// nothing, and a box restarted then starts from its cache; with quorum
// back every box catches up, also past a compaction while it was cut
// off; a revision one box cannot apply leaves that box on its last good
// one, saying why, and the others move on.
func TestFleet(t *testing.T) {
	co := testbed.ConfigOptions{Health: testbed.FastHealth, Echo: true, Backends: 3}
	e := newFleetEnv(t, co)
	ef := e.startEcho(t, testbed.VIPDSR, 150)
	defer func() { ef.Finish() }()

	t.Run("push", func(t *testing.T) {
		co := e.co
		co.Backends = 4
		rev := e.push(t, co)
		took := e.waitBoxes(t, "every box at the pushed revision", func(f *api.FleetState) bool { return f.Revision >= rev && !f.Stale })
		t.Logf("push of revision %d applied on every box within %v (polling every 10 ms)", rev, took)
		for i := range e.boxes {
			st, err := e.boxes[i].State()
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range st.VIPs {
				if v.Name == "web-dsr" && len(v.Backends) != 4 {
					t.Errorf("box %d: web-dsr has %d backends after the push, want 4", i+1, len(v.Backends))
				}
			}
		}
		check(t, ef, "push")
	})

	t.Run("drain -fleet -wait", func(t *testing.T) {
		drained := e.bed.Backends[0]
		start := time.Now()
		out, code := e.vipd(t, "drain", "-fleet", "-wait", "-reason", "e2e", "-config", e.local, "web-dsr", drained.Addr.String())
		took := time.Since(start)
		if code != 0 || !strings.Contains(out, "applied by every live box (3)") {
			t.Fatalf("vipd drain -fleet -wait: exit %d:\n%s", code, out)
		}
		t.Logf("vipd drain -fleet -wait returned after %v", took)
		for i := 0; i < 100; i++ {
			_, name, err := e.get(testbed.VIPDSR)
			if err != nil {
				t.Fatalf("new connection %d: %v", i+1, err)
			}
			if name == drained.Name {
				t.Fatalf("new connection %d went to the drained backend %s", i+1, name)
			}
		}
		check(t, ef, "fleet drain")
		// The flows that began before the push and the drain are
		// pinned by the boxes' connection tables only: a box that
		// restarts (below) has none, and places them by the tables of
		// now, which moved some. New flows, begun on the tables a
		// restarted box builds again from its cache, keep their
		// backends through a restart.
		ef.Finish()
		ef = e.startEcho(t, testbed.VIPDSR, 150)
	})

	t.Run("quorum lost", func(t *testing.T) {
		e.etcd.Kill(1)
		e.etcd.Kill(2)
		e.waitBoxes(t, "every box stale", func(f *api.FleetState) bool { return f.Stale && !f.Connected })
		for i, v := range e.boxes {
			fams, err := v.Metrics()
			if err != nil {
				t.Fatal(err)
			}
			// Every fleet metric the dashboard and the rules name is
			// there (TestMonitoredMetricsExist leaves them to this test).
			for _, name := range monitoredMetrics(t) {
				if _, ok := fams[name]; strings.HasPrefix(name, fleetMetric) && !ok {
					t.Errorf("box %d: %s is used by the dashboard or the rules but not on /metrics", i+1, name)
				}
			}
			if c, st := testbed.Metric(fams, "vipd_fleet_connected"), testbed.Metric(fams, "vipd_fleet_stale"); c != 0 || st != 1 {
				t.Errorf("box %d: vipd_fleet_connected %v, vipd_fleet_stale %v; want 0 and 1", i+1, c, st)
			}
		}
		// Longer than the routers' hold time (3 s): no box withdrew.
		want := fmt.Sprint(e.allBoxes())
		testkit.Stable(t, patience, 5*time.Second, "every box's route kept while etcd is away", func() bool {
			got, err := testbed.NextHops(e.bed.Router, hostRoute(testbed.VIPDSR))
			return err == nil && fmt.Sprint(got) == want
		})
		check(t, ef, "quorum lost")

		// A box restarted while etcd is away starts from its cache.
		if err := e.boxes[1].Stop(); err != nil {
			t.Fatal(err)
		}
		e.start(1)
		if f := e.fleetOf(t, 1); !f.FromCache || !f.Stale {
			t.Errorf("box 2 restarted without etcd: %+v", f)
		}
		waitHops(t, e.bed.Bed, testbed.VIPDSR, e.allBoxes(), 20*time.Second, "the restarted box announces")
		check(t, ef, "a box restarted while etcd is away")
	})

	t.Run("quorum back", func(t *testing.T) {
		e.etcd.Restart(1)
		e.etcd.Restart(2)
		e.etcd.Ready(t)
		e.waitBoxes(t, "every box current", func(f *api.FleetState) bool { return !f.Stale && f.Connected && !f.FromCache })

		// Box 3 cut off from etcd while a change lands and etcd
		// compacts its history past the revision box 3 holds.
		e.proxies[2].Cut()
		waitFor(t, patience, "box 3 stale", func() bool { return e.fleetOf(t, 2).Stale })
		co := e.co
		co.Weights = []int{1, 2, 1, 1}
		rev := e.push(t, co)
		e.etcd.Compact(t, rev)
		e.proxies[2].Restore()
		e.waitBoxes(t, "every box at the revision pushed while box 3 was away", func(f *api.FleetState) bool { return f.Revision >= rev && !f.Stale })
		e.waitBoxKeys(t, rev)
		check(t, ef, "quorum back and a compaction")
	})

	t.Run("a revision one box cannot apply", func(t *testing.T) {
		// Box 3 holds 198.18.0.200 itself: a VIP there is one it must
		// refuse (dataplane.ErrVIPIsLocal), the others take it.
		extra := netip.MustParseAddr("198.18.0.200")
		e.bed.Boxes[2].Must(t, "ip", "addr", "add", extra.String()+"/32", "dev", "lo")
		before := e.fleetOf(t, 2).Revision
		co := e.co
		co.Extra = fmt.Sprintf("[[vip]]\nname = \"extra\"\naddress = \"%s\"\nport = 80\nprotocol = \"tcp\"\nmode = \"nat\"\n[vip.healthcheck]\ntype = \"none\"\n[[vip.backend]]\naddress = \"%s\"\nport = 8081\n", extra, e.bed.Backends[1].Addr)
		rev := e.push(t, co)
		waitFor(t, patience, "box 3 refuses the revision", func() bool {
			f := e.fleetOf(t, 2)
			return f.Refused == rev && f.Revision == before && strings.Contains(f.RefusedWhy, "box's own addresses")
		})
		for i := 0; i < 2; i++ {
			waitFor(t, patience, fmt.Sprintf("box %d at the revision", i+1), func() bool { return e.fleetOf(t, i).Revision >= rev })
		}
		start := time.Now()
		waitFor(t, patience, "boxes 1 and 2's keys at the revision", func() bool {
			boxes, err := fleet.Boxes(context.Background(), e.cli, fleetPrefix)
			n := 0
			for _, b := range boxes {
				if b.Revision >= rev {
					n++
				}
			}
			return err == nil && n == 2
		})
		t.Logf("box keys of boxes 1 and 2 at revision %d after %v", rev, time.Since(start))
		out, code := e.vipd(t, "fleet", "status", "-config", e.local)
		t.Logf("vipd fleet status:\n%s", out)
		if code != 1 || !strings.Contains(out, "box3") {
			t.Errorf("vipd fleet status with a box behind: exit %d, want 1, naming box3", code)
		}
		check(t, ef, "a revision one box refuses")
	})
}
