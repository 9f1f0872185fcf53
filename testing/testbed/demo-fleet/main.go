package main

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/vipd/vipd/testing/testbed"
	"github.com/vipd/vipd/testing/testkit"
)

func main() {
	testbed.MustBeRoot("make demo-fleet", "it creates network namespaces and attaches XDP programs inside them")
	testbed.MustHave("make demo-fleet", "BIRD 2 as the router", "bird2", "bird", "birdc")
	testbed.MustHave("make demo-fleet", "Debian's etcd-server", "etcd-server", "etcd")
	took := testbed.NewRun("demo-fleet").Go(demo)
	fmt.Printf("\nAll namespaces, links and processes removed. Demo took %.1f s.\n", took.Seconds())
}

const (
	routerASN = 65000
	boxASN    = 65010
	prefix    = "/vipd/fleets/demo/"
)

func demo(r *testbed.Run) {
	const boxes = 3
	fmt.Println("== building vipd; bringing up a client, a router running BIRD, three vipd boxes and four backends")
	bed := testbed.NewECMP(r, boxes, 4)
	var peers []testbed.BirdPeer
	for i := range boxes {
		peers = append(peers, testbed.BirdPeer{Name: fmt.Sprintf("box%d", i+1), Addr: testbed.BoxAddr(i), ASN: boxASN})
	}
	bed.StartBird(bed.Router, testbed.BirdOptions{ASN: routerASN, RouterID: testbed.RouterBox, HoldTime: 3, Peers: peers})

	fmt.Printf("\n== etcd: three members of Debian's etcd-server on %s (the router's namespace), ports 2379, 2381, 2383\n", testbed.RouterBackend)
	etcd := bed.StartEtcd(bed.Router, testbed.RouterBackend, 3)
	fleetKeys := testbed.FleetTable(etcd.Endpoints(), prefix, "", "")
	operator := bed.Path("operator.toml")
	write(r, operator, "[dataplane]\ningress = \"eth0\"\n"+fleetKeys)
	vipd := func(args ...string) (string, int) {
		out, err := bed.Client.Cmd(append([]string{bed.Bin.VIPD}, args...)...).CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			r.Fatalf("vipd %s: %v", strings.Join(args, " "), err)
		}
		return string(out), code
	}
	show := func(args ...string) {
		fmt.Printf("   $ vipd %s\n", strings.Join(args, " "))
		out, code := vipd(args...)
		fmt.Print(indent(strings.TrimRight(out, "\n")) + "\n")
		if code != 0 {
			fmt.Printf("   (exit %d)\n", code)
		}
	}

	co := testbed.ConfigOptions{Health: testbed.FastHealth, Echo: true, Backends: 3}
	shared := func(co testbed.ConfigOptions) string {
		_, doc := testbed.SplitFleet(bed.Config(co))
		return doc
	}
	doc := bed.Path("shared.toml")
	write(r, doc, shared(co))
	fmt.Printf("\n== the fleet's configuration (flow_hash_seed and every [[vip]]: NAT, DSR, UDP, echo), pushed once for every box\n")
	show("fleet", "push", "-config", operator, doc)

	bgp := fmt.Sprintf("\n[bgp]\nasn = %d\nhold_time = \"3s\"\nkeepalive = \"1s\"\n[[bgp.peer]]\naddress = %q\nasn = %d\n", boxASN, testbed.RouterBox, routerASN)
	fmt.Printf("\n== three boxes whose files have no [[vip]]: [dataplane], [admin], [bgp] and [fleet] only\n")
	vipds := make([]*testbed.VIPD, boxes)
	for i := range boxes {
		own, _ := testbed.SplitFleet(bed.BoxConfig(i, co, ""))
		cache := bed.BoxPath(i, "/var/lib/vipd/fleet.cache")
		if err := os.MkdirAll(cache[:strings.LastIndex(cache, "/")], 0o755); err != nil {
			r.Fatalf("%v", err)
		}
		local := own + bgp + testbed.FleetTable(etcd.Endpoints(), prefix, fmt.Sprintf("box%d", i+1), cache)
		vipds[i] = bed.StartBox(i, local)
		fmt.Printf("   box%d: vipd pid %d, %s, the fleet's VIPs from etcd\n", i+1, vipds[i].PID(), testbed.BoxAddr(i))
	}
	vip := testbed.VIPDSR
	waitHops(r, bed, vip, boxes)
	fmt.Printf("   the router's ECMP route to %s:\n%s\n", vip, indent(strings.TrimSpace(bed.Router.Must(r, "ip", "route", "show", vip.String()+"/32"))))
	show("fleet", "status", "-config", operator)

	fmt.Printf("\n== 100 long-lived TCP connections through the DSR VIP, streaming both ways\n")
	ef, err := bed.StartEchoFlows(vip, 100)
	if err != nil {
		r.Fatalf("%v", err)
	}
	defer ef.Finish()
	fmt.Printf("   100 streaming; per backend:%s\n", counts(ef.Backends()))

	fmt.Printf("\n== a fourth backend, pushed to the fleet: every box applies the one revision\n")
	co.Backends = 4
	write(r, doc, shared(co))
	show("fleet", "push", "-config", operator, doc)
	waitFleet(r, vipds, "every box at the pushed revision", func(st fleetView) bool { return st.backends == 4 })
	show("fleet", "status", "-config", operator)

	fmt.Printf("\n== backend1 drained through the fleet; -wait returns once every box runs it\n")
	show("drain", "-fleet", "-wait", "-reason", "demo", "-config", operator, "web-dsr", bed.Backends[0].Addr.String())

	fmt.Printf("\n== two of the three etcd members killed: etcd has no quorum\n")
	etcd.Kill(1)
	etcd.Kill(2)
	t0 := time.Now()
	waitFleet(r, vipds, "every box stale", func(st fleetView) bool { return st.stale })
	fmt.Printf("   every box says it is stale after %.1f s, and keeps forwarding with the revision it has:\n", time.Since(t0).Seconds())
	fmt.Print(indent(firstLines(bed.Boxes[0].Must(r, bed.Bin.VIPD, "status", "-admin", testbed.AdminAddr), 3)) + "\n")
	show("fleet", "status", "-config", operator, "-timeout", "2s")
	time.Sleep(5 * time.Second) // past the routers' hold time (3 s): no route withdrawn
	fmt.Printf("   5 s later the router still has every box:\n%s\n", indent(strings.TrimSpace(bed.Router.Must(r, "ip", "route", "show", vip.String()+"/32"))))
	broken := ef.Settle(15 * time.Second)
	fmt.Printf("   %d of %d connections broken through the push, the drain and etcd's outage\n", len(broken), ef.Len())
	if len(broken) > 0 {
		r.Fatalf("%d connections broke: %s", len(broken), testbed.FirstN(broken, 5))
	}
}

// fleetView is what the demo reads of a box's fleet.
type fleetView struct {
	stale    bool
	backends int // of web-dsr
}

// waitFleet waits until every box's view satisfies ok.
func waitFleet(r *testbed.Run, vipds []*testbed.VIPD, what string, ok func(fleetView) bool) {
	if !testkit.Poll(30*time.Second, func() bool {
		for _, v := range vipds {
			st, err := v.State()
			if err != nil || st.Fleet == nil {
				return false
			}
			fv := fleetView{stale: st.Fleet.Stale}
			for _, vs := range st.VIPs {
				if vs.Name == "web-dsr" {
					fv.backends = len(vs.Backends)
				}
			}
			if !ok(fv) {
				return false
			}
		}
		return true
	}) {
		r.Fatalf("timed out waiting for %s", what)
	}
}

// waitHops waits until the router routes vip over n boxes.
func waitHops(r *testbed.Run, bed *testbed.ECMPBed, vip netip.Addr, n int) {
	if !testkit.Poll(30*time.Second, func() bool {
		hops, _ := testbed.NextHops(bed.Router, netip.PrefixFrom(vip, 32))
		return len(hops) == n
	}) {
		r.Fatalf("the router has no %d-way route to %s after 30 s", n, vip)
	}
}

func write(r *testbed.Run, path, s string) {
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		r.Fatalf("%v", err)
	}
}

func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

func counts(m map[string]int) string {
	var b strings.Builder
	for _, n := range []string{"backend1", "backend2", "backend3", "backend4"} {
		if m[n] > 0 {
			fmt.Fprintf(&b, "  %s=%d", n, m[n])
		}
	}
	return b.String()
}

func indent(s string) string {
	return "   " + strings.ReplaceAll(s, "\n", "\n   ")
}
