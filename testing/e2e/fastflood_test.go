package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vipd/vipd/testing/testbed"
)

// flood sends n packets of new flows from the client to vip:port, each
// from its own source port from first on: SYNs and, every other one,
// mid-stream ACKs (a flow first seen mid-stream starts at proof level 1,
// as a flow the fast path carries does before it is proven: conntrack
// evicts the least proven, and among those the one seen longest ago). At
// most burst packets at a time, a millisecond apart: bounded in count and
// time.
func flood(t *testing.T, bed *testbed.Bed, vip net.IP, port uint16, first, n int) {
	t.Helper()
	pc, err := testbed.ListenPacket(bed.Client, "ip4:tcp", testbed.ClientAddr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	ip := &layers.IPv4{SrcIP: net.IP(testbed.ClientAddr.AsSlice()), DstIP: vip, Protocol: layers.IPProtocolTCP}
	dst := &net.IPAddr{IP: vip}
	const burst = 64
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; i < n; i++ {
		tcp := &layers.TCP{SrcPort: layers.TCPPort(first + i), DstPort: layers.TCPPort(port), Seq: uint32(i) * 7919, Window: 1024}
		if i%2 == 0 {
			tcp.SYN = true
		} else {
			tcp.ACK, tcp.Ack = true, 1
		}
		tcp.SetNetworkLayerForChecksum(ip)
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: true}, tcp); err != nil {
			t.Fatal(err)
		}
		if _, err := pc.WriteTo(buf.Bytes(), dst); err != nil && err != syscall.ENOBUFS {
			t.Fatalf("flood packet %d: %v", i, err)
		}
		if i%burst == burst-1 {
			time.Sleep(time.Millisecond) // paces the flood, not a wait
		}
		if time.Now().After(deadline) {
			t.Fatalf("the flood took more than 30 s (%d of %d sent)", i, n)
		}
	}
}

// TestFastPathFlood: 50 connections stream through the XDP fast path
// (fast_path_refresh 5 s); 3.5 s after they opened a flood of new flows
// at 5× the connection table's capacity (1,024 flows) goes through vipd;
// then the backend that holds most of them is drained, and the flows'
// fast path entries expire.
// 0 connections break, 0 move. Before, a flow the fast path carried
// stayed unproven for two refreshes (10 s): the flood evicted it, and
// when its entry expired the worker, finding no entry, placed it anew:
// away from the drained backend, which reset it.
func TestFastPathFlood(t *testing.T) {
	requireE2E(t)
	co := testbed.ConfigOptions{FastPath: "5s", Echo: true, Capacity: 1024}
	e := setup(t, testbed.Options{XDPPeers: true}, co)
	const conns = 50
	ef, err := e.bed.StartEchoFlows(testbed.VIPNAT, conns)
	if err != nil {
		t.Fatal(err)
	}
	opened := time.Now() // every connection is open and has echoed once
	// The flood comes 3.5 s after the connections opened. A flow the
	// workers carry alone is proven (unevictable) after packets in three
	// distinct seconds, some 2 s; one the fast path carries must be too.
	// Before Brief entries it stayed at proof level 1 until its entry's
	// first renewal (5 s), as low as the flood's mid-stream ACKs and seen
	// longer ago: the first to be evicted. (A flow at level 2 outranks
	// every new flow: a flood evicts none.)
	time.Sleep(time.Until(opened.Add(3500 * time.Millisecond)))
	t.Logf("flood %v after the connections opened; fast path offers so far %v", time.Since(opened).Round(time.Millisecond), e.metric("vipd_fast_path_offered_total"))

	capacity := 1024
	flood(t, e.bed, net.IP(testbed.VIPNAT.AsSlice()), testbed.EchoPort, 20000, 5*capacity)
	evicted := e.eventually(func(v float64) bool { return v > 0 }, "vipd_conntrack_evictions_total", "reason", "unestablished")
	t.Logf("flood: %v unproven flows evicted, %v inserts refused", evicted, e.metric("vipd_conntrack_full_total"))
	if evicted == 0 {
		t.Fatal("the flood evicted nothing: it did not fill the table")
	}

	// Drain the backend with most of the connections: a connection the
	// flood evicted would be placed anew when its entry expires, away
	// from it.
	byBackend := ef.Backends()
	var target *testbed.Backend
	for _, be := range e.bed.Backends {
		if target == nil || byBackend[be.Name] > byBackend[target.Name] {
			target = be
		}
	}
	if err := e.v.Drain("echo-nat", target.Addr.String(), true); err != nil {
		t.Fatal(err)
	}
	t.Logf("drained %s, which holds %d of the %d connections (%v)", target.Name, byBackend[target.Name], conns, byBackend)
	// Past the entries' expiry: every connection that is still alive
	// has been renewed by a worker (a moved one is not: it breaks).
	base := e.metric("vipd_fast_path_offered_total")
	e.eventuallyFor(30*time.Second, func(v float64) bool { return v >= base+conns }, "vipd_fast_path_offered_total")
	broken := ef.Settle(30 * time.Second)
	repicked := e.metric("vipd_flows_repicked_total")
	t.Logf("%d connections, %d broken, %v repicked", conns, len(broken), repicked)
	if len(broken) > 0 {
		t.Errorf("%d of %d connections broke: %s", len(broken), conns, testbed.FirstN(broken, 5))
	}
	if repicked != 0 {
		t.Errorf("%v flows re-picked, want 0", repicked)
	}
	e.fastPathUsed(co, 1000)
}

// echoFrom opens a connection from the client's port to vip's echo
// server, reads the backend's name and checks rounds echoes of 256 bytes,
// gap apart.
func echoFrom(t *testing.T, bed *testbed.Bed, port int, vip netip.Addr, rounds int, gap time.Duration) (*net.TCPConn, string, error) {
	t.Helper()
	var c net.Conn
	err := bed.Client.Do(func() error {
		d := net.Dialer{
			Timeout:   10 * time.Second,
			LocalAddr: &net.TCPAddr{IP: net.IP(testbed.ClientAddr.AsSlice()), Port: port},
			Control: func(_, _ string, rc syscall.RawConn) error {
				var serr error
				rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1) })
				return serr
			},
		}
		var err error
		c, err = d.Dial("tcp", netip.AddrPortFrom(vip, testbed.EchoPort).String())
		return err
	})
	if err != nil {
		return nil, "", err
	}
	tc := c.(*net.TCPConn)
	tc.SetDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(tc)
	name, err := r.ReadString('\n')
	if err != nil {
		tc.Close()
		return nil, "", fmt.Errorf("reading the backend's name: %w", err)
	}
	out, in := make([]byte, 256), make([]byte, 256)
	for i := range rounds {
		for j := range out {
			out[j] = byte(i*31 + j)
		}
		if _, err := tc.Write(out); err != nil {
			tc.Close()
			return nil, "", fmt.Errorf("round %d: %w", i, err)
		}
		if _, err := io.ReadFull(r, in); err != nil || !bytes.Equal(in, out) {
			tc.Close()
			return nil, "", fmt.Errorf("round %d: the echo: %v", i, err)
		}
		time.Sleep(gap) // pacing the client's traffic
	}
	return tc, strings.TrimSpace(name), nil
}

// TestReusedTupleFastPath: with the fast path on, a client's connection
// ends and the client opens a new one from the same port, after the
// operator began draining the backend the first one went to. The new
// connection goes to another backend and works: its SYN retired the old
// connection's fast path entry (or the RST that ended it did, when vipd
// saw one), which would otherwise have carried the new one's ACK and
// data to the draining backend (it answers them with a reset).
//
// The first connection ends with the client's RST (no TIME_WAIT, so its
// port is free at once), which vipd sees, or with one it never sees (an
// nftables rule in the client's namespace drops it: a close vipd misses,
// as a backend's RST in DSR mode, or a NAT reply, which does not move a
// flow's state). Before, the new connection stayed on the draining
// backend: in the first case until the RST retired the entry, in the
// second for as long as the old connection's entry lived.
func TestReusedTupleFastPath(t *testing.T) {
	requireE2E(t)
	for _, tc := range []struct {
		name   string
		unseen bool
		port   int
	}{
		{"close seen", false, 45000},
		{"close unseen", true, 45001},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := exec.LookPath("nft"); tc.unseen && err != nil {
				t.Skip("nft (nftables) is not installed: make test-deps installs it as root")
			}
			co := testbed.ConfigOptions{FastPath: "5s", Echo: true}
			e := setup(t, testbed.Options{XDPPeers: true}, co)
			// 3.5 s of traffic: the connection is proven after some 2 s,
			// and its entry is renewed for fast_path_refresh (5 s) after
			// that.
			c, first, err := echoFrom(t, e.bed, tc.port, testbed.VIPNAT, 35, 100*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if n := e.eventually(func(v float64) bool { return v >= 4 }, "vipd_fast_path_offered_total"); n < 4 {
				t.Fatalf("%v fast path offers, want the handshake's ACK's and 3 renewals", n)
			}
			if tc.unseen {
				cli := e.bed.Client
				cli.Must(t, "nft", "add", "table", "inet", "vipdtest")
				t.Cleanup(func() { cli.Cmd("nft", "delete", "table", "inet", "vipdtest").Run() })
				cli.Must(t, "nft", "add", "chain", "inet", "vipdtest", "out", "{ type filter hook output priority 0 ; }")
				cli.Must(t, "nft", "add", "rule", "inet", "vipdtest", "out", "tcp", "sport", strconv.Itoa(tc.port), "tcp", "flags", "rst", "counter", "drop")
			}
			c.SetLinger(0)
			c.Close() // an RST
			if tc.unseen {
				// The RST is dropped before it leaves: the rule counts it.
				waitFor(t, 10*time.Second, "the client's RST dropped", func() bool {
					out, _ := e.bed.Client.Cmd("nft", "list", "table", "inet", "vipdtest").Output()
					return strings.Contains(string(out), "packets 1 ")
				})
			}
			var target *testbed.Backend
			for _, be := range e.bed.Backends {
				if be.Name == first {
					target = be
				}
			}
			if target == nil {
				t.Fatalf("no backend named %q", first)
			}
			if err := e.v.Drain("echo-nat", target.Addr.String(), true); err != nil {
				t.Fatal(err)
			}
			c, second, err := echoFrom(t, e.bed, tc.port, testbed.VIPNAT, 20, 0)
			if err != nil {
				t.Fatalf("the new connection from the same port (the first went to %s, now draining): %v", first, err)
			}
			c.Close()
			if second == first {
				t.Errorf("the new connection from the same port went to %s again, which is draining", first)
			}
			if n := e.eventually(func(v float64) bool { return v >= 1 }, "vipd_flows_reused_tuple_total"); n != 1 {
				t.Errorf("vipd_flows_reused_tuple_total = %v, want 1", n)
			}
			if n := e.eventually(func(v float64) bool { return v >= 1 }, "vipd_fast_path_retired_total"); n < 1 {
				t.Errorf("vipd_fast_path_retired_total = %v, want the old connection's entry retired", n)
			}
			t.Logf("first connection to %s, the new one from the same port to %s", first, second)
		})
	}
}
