package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/vipd/vipd/testing/testbed"
)

func main() {
	testbed.MustBeRoot("make demo-ecmp", "it creates network namespaces and attaches XDP programs inside them")
	testbed.MustHave("make demo-ecmp", "BIRD 2 as the router", "bird2", "bird", "birdc")
	took := testbed.NewRun("demo-ecmp").Go(demo)
	fmt.Printf("\nAll namespaces, links and processes removed. Demo took %.1f s.\n", took.Seconds())
}

const (
	routerASN = 65000
	boxASN    = 65010
)

func demo(r *testbed.Run) {
	const boxes = 2
	fmt.Println("== building vipd; bringing up a client, a router running BIRD, two vipd boxes and three backends")
	bed := testbed.NewECMP(r, boxes, 3)
	var peers []testbed.BirdPeer
	for i := 0; i < boxes; i++ {
		peers = append(peers, testbed.BirdPeer{Name: fmt.Sprintf("box%d", i+1), Addr: testbed.BoxAddr(i), ASN: boxASN})
	}
	bed.StartBird(bed.Router, testbed.BirdOptions{ASN: routerASN, RouterID: testbed.RouterBox, HoldTime: 3, Peers: peers})
	bgp := fmt.Sprintf("\n[bgp]\nasn = %d\nhold_time = \"3s\"\nkeepalive = \"1s\"\n[[bgp.peer]]\naddress = %q\nasn = %d\n",
		boxASN, testbed.RouterBox, routerASN)
	co := testbed.ConfigOptions{Health: testbed.FastHealth, Echo: true}
	vipds := make([]*testbed.VIPD, boxes)
	for i := range vipds {
		vipds[i] = bed.StartBox(i, bed.BoxConfig(i, co, bgp))
		fmt.Printf("   box%d: vipd pid %d, %s on the router's segment, AS %d peering with the router (AS %d)\n",
			i+1, vipds[i].PID(), testbed.BoxAddr(i), boxASN, routerASN)
	}

	vip := testbed.VIPDSR
	fmt.Printf("\n== the router's kernel table: BIRD merged both boxes' announcements of %s into one ECMP route\n", vip)
	var route string
	deadline := time.Now().Add(20 * time.Second)
	for {
		route = strings.TrimSpace(bed.Router.Must(r, "ip", "route", "show", vip.String()+"/32"))
		if hops, _ := testbed.NextHops(bed.Router, netip.PrefixFrom(vip, 32)); len(hops) == boxes {
			break
		}
		if time.Now().After(deadline) {
			r.Fatalf("the router has no two-way route to %s after 20 s:\n%s", vip, route)
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Println(indent(route))

	fmt.Printf("\n== 200 HTTP requests, each on a new connection, to the DSR VIP http://%s/\n", vip)
	before := newFlows(r, vipds, "web-dsr")
	perBackend := map[string]int{}
	for i := 0; i < 200; i++ {
		name, err := get(bed, vip)
		if err != nil {
			r.Fatalf("request %d: %v", i+1, err)
		}
		perBackend[name]++
	}
	// The workers publish their counters periodically: wait for all 200.
	after := newFlows(r, vipds, "web-dsr")
	for t0 := time.Now(); after[0]+after[1]-before[0]-before[1] < 200 && time.Since(t0) < 3*time.Second; {
		time.Sleep(100 * time.Millisecond)
		after = newFlows(r, vipds, "web-dsr")
	}
	fmt.Printf("   200 ok; the router's 5-tuple hash split them: box1=%.0f box2=%.0f; per backend:%s\n",
		after[0]-before[0], after[1]-before[1], counts(perBackend))

	fmt.Printf("\n== 100 long-lived TCP connections through the DSR VIP, streaming both ways (every chunk echoed and compared)\n")
	ef, err := bed.StartEchoFlows(vip, 100)
	if err != nil {
		r.Fatalf("%v", err)
	}
	fmt.Printf("   100 streaming; per backend:%s\n", counts(ef.Backends()))

	fmt.Printf("\n== box2 dies silently: its link is cut, then vipd is SIGKILLed (no FIN, no BGP NOTIFICATION reaches the router)\n")
	t0 := time.Now()
	bed.Boxes[1].Must(r, "ip", "link", "set", "eth0", "down")
	vipds[1].Kill()
	for {
		if hops, _ := testbed.NextHops(bed.Router, netip.PrefixFrom(vip, 32)); len(hops) == 1 {
			break
		}
		if time.Since(t0) > 15*time.Second {
			r.Fatalf("the router still routes to box2 after 15 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Printf("   the router's hold timer dropped box2 after %.1f s:\n", time.Since(t0).Seconds())
	fmt.Println(indent(strings.TrimSpace(bed.Router.Must(r, "ip", "route", "show", vip.String()+"/32"))))
	broken := ef.Settle(15 * time.Second)
	ef.Finish()
	fmt.Printf("   box1 took over box2's connections mid-stream, with the same backends (same Maglev table, no shared state):\n")
	fmt.Printf("   %d of %d connections broken\n", len(broken), ef.Len())
	if len(broken) > 0 {
		fmt.Printf("   %s\n", testbed.FirstN(broken, 5))
	}

	fmt.Printf("\n== vipd status on box1\n")
	fmt.Print(bed.Boxes[0].Must(r, bed.Bin.VIPD, "status", "-admin", testbed.AdminAddr))
	if len(broken) > 0 {
		r.Fatalf("%d connections broke", len(broken))
	}
}

// newFlows is the VIP's new-flow counter on each box.
func newFlows(r *testbed.Run, vipds []*testbed.VIPD, vip string) []float64 {
	var out []float64
	for _, v := range vipds {
		fams, err := v.Metrics()
		if err != nil {
			r.Fatalf("metrics: %v", err)
		}
		out = append(out, testbed.Metric(fams, "vipd_vip_new_flows_total", "vip", vip))
	}
	return out
}

// get fetches / from vip:80 on a fresh connection from the client and
// returns the backend's name.
func get(bed *testbed.ECMPBed, vip netip.Addr) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := testbed.Dialer(bed.Client)(ctx, "tcp", netip.AddrPortFrom(vip, 80).String())
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.0\r\nHost: vip\r\n\r\n"); err != nil {
		return "", err
	}
	body, err := io.ReadAll(bufio.NewReader(c))
	if err != nil {
		return "", err
	}
	_, name, ok := strings.Cut(string(body), "\r\n\r\n")
	if !ok {
		return "", fmt.Errorf("no HTTP body in %q", body)
	}
	return strings.TrimSpace(name), nil
}

func counts(m map[string]int) string {
	var names []string
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "  %s=%d", n, m[n])
	}
	return b.String()
}

func indent(s string) string {
	return "   " + strings.ReplaceAll(s, "\n", "\n   ")
}
