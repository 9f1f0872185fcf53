package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/testing/testbed"
)

// TestKeepalivedFailover: two vipd boxes on one segment under keepalived (Debian's,
// with the package's example configuration), no BGP, shared backends;
// long-lived TCP connections stream both ways through a DSR and a NAT VIP
// while the active box fails and comes back, and while its vipd restarts
// as systemd restarts it (the unit's runtime directory removed), with
// keepalived's state kept and with it lost. No connection table is
// copied: the other box picks the same backends by Maglev. For each event
// it logs the connections broken and how long until every connection
// made progress again, and fails on any broken one.
func TestKeepalivedFailover(t *testing.T) {
	requireE2E(t)
	testbed.RequireKeepalived(t)
	const perVIP = 150
	bed := testbed.NewECMPWith(t, 2, testbed.Options{Backends: 3})
	// NAT backends reply through the VRRP gateway, which moves with the
	// MASTER (the standard LVS-NAT pair).
	for _, be := range bed.Backends {
		be.NS.Must(t, "ip", "route", "replace", "default", "via", testbed.GatewayVRRP)
	}
	co := testbed.ConfigOptions{Echo: true, Health: testbed.FastHealth}
	boxCfg := func(i int) string {
		cfg := bed.BoxConfig(i, co, "")
		return strings.Replace(cfg, "[dataplane]\n", "[dataplane]\nneighbor_role = \"standby\"\n", 1)
	}
	v := []*testbed.VIPD{bed.StartBox(0, boxCfg(0)), bed.StartBox(1, boxCfg(1))}
	ka := []*testbed.Keepalived{bed.StartKeepalived(0, 150, true), bed.StartKeepalived(1, 100, true)}
	t.Cleanup(func() {
		if t.Failed() {
			for i := range v {
				t.Logf("box %d keepalived log:\n%s\nvipd log:\n%s", i, tail(ka[i].Log(), 25), tail(v[i].Log(), 25))
			}
		}
	})
	role := func(i int) string {
		st, err := v[i].State()
		if err != nil {
			return "down"
		}
		return st.Role
	}
	waitRoles := func(what string, want ...string) time.Time {
		t.Helper()
		waitFor(t, patience, what, func() bool { return role(0) == want[0] && role(1) == want[1] })
		return time.Now()
	}
	waitRoles("box 0 active and box 1 standby", api.RoleActive, api.RoleStandby)
	dsr, err := bed.StartEchoFlows(testbed.VIPDSR, perVIP)
	if err != nil {
		t.Fatal(err)
	}
	defer dsr.Finish()
	nat, err := bed.StartEchoFlows(testbed.VIPNAT, perVIP)
	if err != nil {
		t.Fatal(err)
	}
	defer nat.Finish()

	// event waits, after an event at t0, until every connection has made
	// progress again, and reports the broken ones.
	// A zero switched time: the active box did not change.
	event := func(name string, t0, switched time.Time) {
		t.Helper()
		bd := dsr.Settle(patience)
		bn := nat.Settle(patience)
		flowing := time.Since(t0)
		sw := "the active box unchanged"
		if !switched.IsZero() {
			sw = fmt.Sprintf("new active box after %.1f s", switched.Sub(t0).Seconds())
		}
		t.Logf("%s: broken DSR %d/%d, NAT %d/%d; %s; every connection moving again after %.1f s",
			name, len(bd), perVIP, len(bn), perVIP, sw, flowing.Seconds())
		if len(bd)+len(bn) > 0 {
			t.Errorf("%s: connections broke: DSR %s; NAT %s", name, testbed.FirstN(bd, 3), testbed.FirstN(bn, 3))
		}
	}

	// 1. vipd on the active box killed (kill -9): its track script fails,
	// box 1 takes over.
	t0 := time.Now()
	v[0].Kill()
	event("kill -9 vipd on the active box", t0, waitRoles("box 1 active", "down", api.RoleActive))

	// 2. vipd back on box 0 (as systemd would restart it): it starts
	// standby, its check passes again, keepalived preempts and makes it
	// active.
	t0 = time.Now()
	v[0] = bed.StartBox(0, boxCfg(0))
	event("vipd back on box 0, preempting", t0, waitRoles("box 0 active again", api.RoleActive, api.RoleStandby))

	// 3. vipd restarted on the active box as `systemctl restart vipd`
	// does it (SIGTERM, the unit's runtime directory removed, started
	// again), faster than the track script's fall × interval: keepalived
	// stays MASTER, the new vipd starts standby, and the check must make
	// it active again from the state recorded before the restart, within
	// an interval or so.
	t0 = time.Now()
	var down time.Duration
	v[0], down = bed.RestartUnit(0, v[0], boxCfg(0))
	up := time.Now()
	waitFor(t, 2*time.Second, "box 0 active again after its restart", func() bool { return role(0) == api.RoleActive })
	active := time.Since(up)
	t.Logf("vipd restarted on the active box: down %.2f s, active again %.2f s after it answered", down.Seconds(), active.Seconds())
	if down > time.Second {
		t.Errorf("the restart took %.2f s, want under 1 s (the scenario is a restart shorter than the track script's fall × interval)", down.Seconds())
	}
	if active > 2*time.Second {
		t.Errorf("box 0 was standby under a MASTER keepalived for %.2f s after its restart, want under 2 s", active.Seconds())
	}
	if st, r1 := kaState(bed, 0), role(1); st != "MASTER" || r1 != api.RoleStandby {
		t.Errorf("after the restart: box 0's keepalived %s, box 1 %s; want MASTER and standby (keepalived never noticed)", st, r1)
	}
	event("vipd restarted on the active box (systemctl restart)", t0, time.Time{})

	// 4. The same with the state lost as well (an upgrade from a vipd
	// that kept it in /run/vipd): the check cannot know, fails while vipd
	// is standby, keepalived goes FAULT and box 1 takes over; FAULT is
	// recorded, the check passes, and box 0 preempts again.
	t0 = time.Now()
	if err := bed.StopUnit(0, v[0]); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(bed.KeepalivedState(0)); err != nil {
		t.Fatal(err)
	}
	v[0] = bed.StartBox(0, boxCfg(0))
	event("vipd restarted on the active box, keepalived's state lost", t0, waitRoles("box 1 active", api.RoleStandby, api.RoleActive))
	t0 = time.Now()
	event("box 0 back from FAULT, preempting", t0, waitRoles("box 0 active again", api.RoleActive, api.RoleStandby))

	// 5. A planned switchover: box 0 steps down (vipd standby, then its
	// keepalived stopped, which tells the other at once).
	t0 = time.Now()
	bed.Boxes[0].Must(t, bed.Bin.VIPD, "standby", "-socket", bed.BoxSocket(0))
	if err := ka[0].Stop(); err != nil {
		t.Fatal(err)
	}
	event("planned switchover", t0, waitRoles("box 1 active", api.RoleStandby, api.RoleActive))

	// 6. Box 0's keepalived back with nopreempt: though its priority is
	// higher, box 1 stays MASTER and nothing moves.
	t0 = time.Now()
	ka[0] = bed.StartKeepalived(0, 150, false)
	waitFor(t, patience, "box 0's keepalived BACKUP", func() bool { return kaState(bed, 0) == "BACKUP" })
	if r0, r1 := role(0), role(1); r0 != api.RoleStandby || r1 != api.RoleActive {
		t.Errorf("box 0 back with nopreempt: roles %s and %s, want standby and active", r0, r1)
	}
	event("box 0 back with nopreempt (box 1 stays active)", t0, time.Time{})

	// 7. The active box lost entirely: its keepalived and vipd killed and
	// its links down, as a box that loses power.
	// The links go first: killed, keepalived's VRRP process gives the
	// addresses up with a priority-0 advertisement, which a box that
	// loses power never sends.
	t0 = time.Now()
	for _, dev := range []string{"eth0", "eth1"} {
		bed.Boxes[1].Must(t, "ip", "link", "set", dev, "down")
	}
	ka[1].Kill()
	v[1].Kill()
	event("the active box lost (keepalived and vipd killed, links down)", t0, waitRoles("box 0 active", api.RoleActive, "down"))

	// 8. Box 1 back, rebooted (without the VRRP address it held, and
	// with an empty /run, a tmpfs: no recorded state, where it was
	// MASTER), with the lower priority: it stays standby.
	t0 = time.Now()
	bed.Boxes[1].Must(t, "ip", "addr", "flush", "dev", "eth1", "to", testbed.GatewayVRRP+"/32")
	if err := os.RemoveAll(bed.BoxPath(1, "/run")); err != nil {
		t.Fatal(err)
	}
	for _, dev := range []string{"eth0", "eth1"} {
		bed.Boxes[1].Must(t, "ip", "link", "set", dev, "up")
	}
	v[1] = bed.StartBox(1, boxCfg(1))
	ka[1] = bed.StartKeepalived(1, 100, true)
	waitFor(t, patience, "box 1's keepalived BACKUP", func() bool { return kaState(bed, 1) == "BACKUP" })
	if r0, r1 := role(0), role(1); r0 != api.RoleActive || r1 != api.RoleStandby {
		t.Errorf("box 1 back: roles %s and %s, want active and standby", r0, r1)
	}
	event("box 1 back (lower priority: stays standby)", t0, time.Time{})
}

// kaState is the VRRP state box i's keepalived last notified.
func kaState(bed *testbed.ECMPBed, i int) string {
	b, _ := os.ReadFile(bed.KeepalivedState(i))
	return strings.TrimSpace(string(b))
}
