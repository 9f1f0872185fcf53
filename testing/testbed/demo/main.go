package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/vipd/vipd/testing/testbed"
	"github.com/vipd/vipd/testing/testkit"
)

func main() {
	testbed.MustBeRoot("make demo", "it creates network namespaces and attaches an XDP program inside them (sudo make demo)")
	took := testbed.NewRun("demo").Go(demo)
	fmt.Printf("\nAll namespaces, links and processes removed. Demo took %.1f s.\n", took.Seconds())
}

func demo(r *testbed.Run) {
	fmt.Println("== building vipd and bringing up the test bed (client, router, vipd box, 3 backends)")
	// XDP programs on the veths that face the box, for the fast path at
	// the end (a NIC needs none); the example's fast_path = "auto" leaves
	// the fast path off on veths anyway.
	bed := testbed.New(r, testbed.Options{XDPPeers: true})
	cfg, err := os.ReadFile(exampleConfig())
	if err != nil {
		r.Fatalf("%v", err)
	}
	v := bed.StartVIPD(inBed(bed, string(cfg)))
	fmt.Printf("   vipd running in namespace %s with config.toml.example (io afxdp, pid %d)\n", bed.Box.Name, v.PID())
	waitChecked(v)

	c := bed.HTTPClient(10 * time.Second)
	for _, vip := range []struct{ name, url string }{
		{"NAT", "http://198.18.0.100/"}, {"DSR", "http://198.18.0.101/"},
	} {
		fmt.Printf("\n== 200 HTTP requests, each on a new connection, to the %s VIP %s\n", vip.name, vip.url)
		counts := map[string]int{}
		failed := 0
		t0 := time.Now()
		for i := 0; i < 200; i++ {
			body, err := testbed.Get(context.Background(), c, vip.url)
			if err != nil {
				failed++
				continue
			}
			counts[strings.TrimSpace(body)]++
		}
		fmt.Printf("   %d ok, %d failed in %.2f s; per backend:", 200-failed, failed, time.Since(t0).Seconds())
		var names []string
		for n := range counts {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Printf("  %s=%d", n, counts[n])
		}
		fmt.Println()
	}
	fmt.Printf("\n== a bounded burst: 20000 TCP SYNs from 20000 client ports to the NAT VIP, as fast as a raw socket sends\n")
	sent := burst(r, bed, 20000)
	waitCounted(r, v)
	fmt.Printf("   sent %d frames\n", sent)

	fams, err := v.Metrics()
	if err != nil {
		r.Fatalf("metrics: %v", err)
	}
	m := func(name string, labels ...string) float64 { return testbed.Metric(fams, name, labels...) }
	fmt.Printf("\n== what vipd counted (from /metrics)\n")
	fmt.Printf("   frames received %.0f, transmitted %.0f (ICMP replies %.0f), to the kernel %.0f, dropped %.0f\n",
		m("vipd_rx_frames_total"), m("vipd_verdicts_total", "verdict", "tx"), m("vipd_verdicts_total", "verdict", "reply"),
		m("vipd_verdicts_total", "verdict", "kernel"), m("vipd_verdicts_total", "verdict", "drop"))
	fmt.Printf("   NAT VIP: %.0f packets in, %.0f out (replies), %.0f new flows; NAT replies translated %.0f\n",
		m("vipd_vip_packets_total", "vip", "web-nat"), m("vipd_vip_out_packets_total", "vip", "web-nat"), m("vipd_vip_new_flows_total", "vip", "web-nat"), m("vipd_nat_replies_total"))
	fmt.Printf("   DSR VIP: %.0f packets in (its replies bypass vipd), %.0f new flows\n", m("vipd_vip_packets_total", "vip", "web-dsr"), m("vipd_vip_new_flows_total", "vip", "web-dsr"))
	fmt.Printf("   ICMP sent %.0f, ICMP errors steered %.0f, conntrack entries %.0f\n",
		m("vipd_icmp_sent_total"), m("vipd_icmp_steered_total"), m("vipd_conntrack_entries"))
	fmt.Printf("   before the pipeline: AF_XDP receive ring full %.0f, fill ring empty %.0f (frames the kernel could not hand to vipd)\n",
		m("vipd_driver_events_total", "event", "xsk_rx_ring_full"), m("vipd_driver_events_total", "event", "xsk_fill_ring_empty"))
	fmt.Printf("   drops by reason:")
	any := false
	for _, mt := range fams["vipd_drops_total"].GetMetric() {
		if v := mt.GetCounter().GetValue(); v > 0 {
			fmt.Printf("  %s=%.0f", mt.GetLabel()[0].GetValue(), v)
			any = true
		}
	}
	if !any {
		fmt.Printf("  none")
	}
	fmt.Println()

	dayToDay(r, bed, v)

	fmt.Printf("\n== stopping vipd (SIGTERM)\n")
	if err := v.Stop(); err != nil {
		r.Fatalf("%v", err)
	}
	if out := bed.Box.Must(r, "ip", "-o", "link"); strings.Contains(out, "xdp") {
		r.Fatalf("an XDP program is still attached after vipd stopped")
	}
	fmt.Println("   stopped cleanly; no XDP program left on the box's interfaces")

	fastPath(r, bed, string(cfg))
}

// waitChecked waits until vipd's /v1/state shows every backend checked
// up (interval 2 s / 1 s in the example: some 2 s on an idle machine, more
// on a busy one), for at most testkit.Patience. The demo goes on after
// that either way: its requests then show what failed.
func waitChecked(v *testbed.VIPD) {
	testkit.Poll(testkit.Patience, func() bool {
		st, err := v.State()
		if err != nil {
			return false
		}
		for _, vip := range st.VIPs {
			for _, b := range vip.Backends {
				if b.Health != "up" && b.Health != "none" {
					return false
				}
			}
		}
		return true
	})
}

// waitCounted waits until vipd's frame counter has stopped moving: the
// workers publish their counters every 100 ms, so one unchanged for
// 300 ms has every frame received so far (bounded by testkit.Patience).
func waitCounted(r *testbed.Run, v *testbed.VIPD) {
	last, since := -1.0, time.Now()
	testkit.Poll(testkit.Patience, func() bool {
		fams, err := v.Metrics()
		if err != nil {
			r.Fatalf("metrics: %v", err)
		}
		if n := testbed.Metric(fams, "vipd_rx_frames_total"); n != last {
			last, since = n, time.Now()
			return false
		}
		return time.Since(since) >= 300*time.Millisecond
	})
}

// fastPath runs vipd again with fast_path = "on" and downloads 32 MiB
// through the NAT VIP: most of both directions' frames are forwarded by
// the XDP program, not by vipd's workers.
func fastPath(r *testbed.Run, bed *testbed.Bed, cfg string) {
	fmt.Printf("\n== the XDP fast path: vipd again with fast_path = \"on\", a 32 MiB download through the NAT VIP\n")
	cfg = strings.Replace(cfg, `fast_path = "auto"`, `fast_path = "on"`, 1)
	v := bed.StartVIPD(inBed(bed, cfg))
	started := time.Now()
	waitChecked(v)
	// Not only the checks: the burst's half-open connections have their
	// SYN-ACKs retransmitted through vipd 1, 3 and 7 s after it, and the
	// counts below must fall between two of those waves, as they do
	// 2.5 s after the start. Counting as soon as the checks passed, a run
	// saw 5,789 frames at the workers instead of ~7.
	time.Sleep(time.Until(started.Add(2500 * time.Millisecond)))
	counts := func() (fast, workers, vip, replies float64) {
		fams, err := v.Metrics()
		if err != nil {
			r.Fatalf("metrics: %v", err)
		}
		m := func(name string, labels ...string) float64 { return testbed.Metric(fams, name, labels...) }
		return m("vipd_driver_events_total", "event", "fast_path_forwarded"), m("vipd_rx_frames_total"),
			m("vipd_vip_packets_total", "vip", "web-nat") + m("vipd_vip_out_packets_total", "vip", "web-nat"), m("vipd_nat_replies_total")
	}
	// The burst's half-open connections still have their SYN-ACKs
	// retransmitted through vipd: count from here.
	f0, w0, v0, r0 := counts()
	const n = 32 << 20
	c := bed.HTTPClient(30 * time.Second)
	t0 := time.Now()
	resp, err := c.Get(fmt.Sprintf("http://198.18.0.100/bytes?n=%d", n))
	if err != nil {
		r.Fatalf("download: %v", err)
	}
	got, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || got != n {
		r.Fatalf("download: %d of %d bytes: %v", got, n, err)
	}
	took := time.Since(t0)
	time.Sleep(1500 * time.Millisecond) // the fast path's counts reach the VIP's within a second
	f1, w1, v1, r1 := counts()
	fmt.Printf("   %d bytes in %.2f s from %s\n", got, took.Seconds(), resp.Header.Get("X-Backend"))
	fmt.Printf("   meanwhile: frames forwarded by the XDP program %.0f; frames vipd's workers received %.0f (the handshake and the FINs)\n",
		f1-f0, w1-w0)
	fmt.Printf("   NAT VIP: %.0f packets, %.0f of them replies (the fast path's included)\n", v1-v0, r1-r0)
	if err := v.Stop(); err != nil {
		r.Fatalf("%v", err)
	}
}

// burst sends n crafted TCP SYNs from the client namespace to the NAT VIP
// through a raw packet socket, as fast as the socket takes them.
func burst(r *testbed.Run, bed *testbed.Bed, n int) int {
	var fd int
	var ifindex int
	var src, dst net.HardwareAddr
	err := bed.Client.Do(func() error {
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		ifindex, src = ifi.Index, ifi.HardwareAddr
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
		return err
	})
	if err != nil {
		r.Fatalf("burst socket: %v", err)
	}
	defer unix.Close(fd)
	// The router's MAC: the client's gateway.
	out := bed.Client.Must(r, "ip", "neigh", "show", testbed.RouterCli.String())
	fields := strings.Fields(out)
	for i, f := range fields {
		if f == "lladdr" && i+1 < len(fields) {
			dst, _ = net.ParseMAC(fields[i+1])
		}
	}
	if dst == nil {
		r.Fatalf("the client has no ARP entry for its router")
	}
	sent := 0
	buf := gopacket.NewSerializeBuffer()
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < n && time.Now().Before(deadline); i++ {
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: net.IP(testbed.ClientAddr.AsSlice()), DstIP: net.IP(testbed.VIPNAT.AsSlice())}
		tcp := &layers.TCP{SrcPort: layers.TCPPort(20000 + i), DstPort: 80, SYN: true, Seq: rand.Uint32(), Window: 1024}
		tcp.SetNetworkLayerForChecksum(ip)
		gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
			&layers.Ethernet{SrcMAC: src, DstMAC: dst, EthernetType: layers.EthernetTypeIPv4}, ip, tcp)
		if unix.Sendto(fd, buf.Bytes(), 0, &unix.SockaddrLinklayer{Ifindex: ifindex}) == nil {
			sent++
		}
	}
	return sent
}

// inBed moves the example's admin socket and state file from /run and
// /var/lib into the bed's own directory.
func inBed(bed *testbed.Bed, cfg string) string {
	dir := filepath.Dir(bed.AdminSocket())
	cfg = strings.Replace(cfg, `socket = "/run/vipd/admin.sock"`, fmt.Sprintf("socket = %q", bed.AdminSocket()), 1)
	return strings.Replace(cfg, `state_file = "/var/lib/vipd/state.json"`, fmt.Sprintf("state_file = %q", filepath.Join(dir, "state.json")), 1)
}

func exampleConfig() string {
	if _, err := os.Stat("config.toml.example"); err == nil {
		return "config.toml.example"
	}
	exe, _ := os.Executable()
	return filepath.Join(filepath.Dir(exe), "config.toml.example")
}
