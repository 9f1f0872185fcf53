// Package rig is the on-interface half of `make bench`: per scenario it
// builds throwaway network namespaces — a generator running trafgen, the
// box (Linux forwarding, nftables, the bare AF_XDP forwarder or vipd) and
// a sink on the backends' side — counts the packets that reach the sink
// over fixed windows, and removes everything again.
//
//	gen  g0 ──veth── eth0  box  eth1 ──veth── s0  sink
//	198.18.0.1   198.18.0.2    198.18.1.1    198.18.1.254
//
// Clients are 198.18.2.1–63 (behind the generator), the VIPs 198.18.0.100
// (NAT) and .101 (DSR), the backends 198.18.1.11–13. The backends are not
// hosts: the box has permanent neighbour entries (no ARP) that map them to
// DropMAC, and the sink's interface counts what arrives before its kernel
// discards it. In the ceiling scenario the generator is wired to the sink.
//
// Names come from nstest.Name, so nstest.SweepStale removes what a killed
// run left; everything else is removed by exact name when the scenario's
// Scope closes. Addresses are from 198.18.0.0/15 and traffic never leaves
// the namespaces.
package rig

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"

	"github.com/vipd/vipd/testing/nstest"
)

// Addresses of the rig.
var (
	GenAddr    = netip.MustParseAddr("198.18.0.1")
	BoxIngress = netip.MustParseAddr("198.18.0.2")
	BoxEgress  = netip.MustParseAddr("198.18.1.1")
	SinkAddr   = netip.MustParseAddr("198.18.1.254")
	ClientNet  = netip.MustParsePrefix("198.18.2.0/24")
	VIPNAT     = netip.MustParseAddr("198.18.0.100")
	VIPDSR     = netip.MustParseAddr("198.18.0.101")
	Backends   = []netip.Addr{
		netip.MustParseAddr("198.18.1.11"),
		netip.MustParseAddr("198.18.1.12"),
		netip.MustParseAddr("198.18.1.13"),
	}
)

// Ports of the UDP traffic: the VIPs' port and the NAT backends' port.
const (
	VIPPort     = 7000
	BackendPort = 7001
)

// DropMAC is where the box (and, in the ceiling scenario, the generator)
// sends the backends' frames: an address that is not the sink's own, so
// that the sink's kernel discards each frame first thing (PACKET_OTHERHOST
// in ip_rcv) after the interface counted it. With the sink's own MAC every
// frame would cost a route lookup, charged to the CPU that sends into the
// sink — the generator's in the ceiling scenario, the box's in the others
// (measured: the ceiling fell from ~0.69 to ~0.46 Mpps).
const DropMAC = "02:00:00:00:53:99"

// Interface names inside the namespaces.
const (
	GenIf  = "g0"
	BoxIn  = "eth0"
	BoxOut = "eth1"
	SinkIf = "s0"
)

// Rig is one scenario's network.
type Rig struct {
	t      nstest.T
	Gen    *nstest.NS
	Box    *nstest.NS // nil when Direct
	Sink   *nstest.NS
	Queues int
	Direct bool // generator wired straight to the sink (the ceiling)
	// MACs the generator and the box address frames to.
	BoxInMAC, BoxOutMAC, SinkMAC string
}

// New builds the namespaces and links of one scenario. queues is the
// number of queues of every veth (numrxqueues and numtxqueues).
func New(t nstest.T, queues int, direct bool) *Rig {
	t.Helper()
	r := &Rig{t: t, Queues: queues, Direct: direct}
	r.Gen = nstest.New(t, "gen")
	r.Sink = nstest.New(t, "snk")
	r.Sink.Sysctl(t, "net.ipv4.ip_forward", "0")
	if direct {
		veth(t, r.Gen, GenIf, r.Sink, SinkIf, queues)
	} else {
		r.Box = nstest.New(t, "box")
		veth(t, r.Gen, GenIf, r.Box, BoxIn, queues)
		veth(t, r.Box, BoxOut, r.Sink, SinkIf, queues)
		r.Box.Must(t, "ip", "addr", "add", BoxIngress.String()+"/24", "dev", BoxIn)
		r.Box.Must(t, "ip", "addr", "add", BoxEgress.String()+"/24", "dev", BoxOut)
		r.Box.Must(t, "ip", "route", "add", ClientNet.String(), "via", GenAddr.String(), "dev", BoxIn)
		r.BoxInMAC = MAC(t, r.Box, BoxIn)
		r.BoxOutMAC = MAC(t, r.Box, BoxOut)
	}
	r.Gen.Must(t, "ip", "addr", "add", GenAddr.String()+"/24", "dev", GenIf)
	r.Sink.Must(t, "ip", "addr", "add", SinkAddr.String()+"/24", "dev", SinkIf)
	r.SinkMAC = MAC(t, r.Sink, SinkIf)
	if !direct {
		genMAC := MAC(t, r.Gen, GenIf)
		r.Box.Must(t, "ip", "neigh", "replace", GenAddr.String(), "lladdr", genMAC, "dev", BoxIn, "nud", "permanent")
		for _, b := range Backends {
			r.Box.Must(t, "ip", "neigh", "replace", b.String(), "lladdr", DropMAC, "dev", BoxOut, "nud", "permanent")
		}
	}
	// Senders toward the box send whole frames with complete checksums,
	// as a physical wire does (see nstest.NoTxOffload).
	r.Gen.NoTxOffload(t, GenIf)
	return r
}

// FirstHopMAC is the destination MAC of the generator's frames.
func (r *Rig) FirstHopMAC() string {
	if r.Direct {
		return DropMAC
	}
	return r.BoxInMAC
}

// veth creates a pair with queues queues each way between a (named an)
// and b (named bn), up and running: nstest.VethNamed with queues.
func veth(t nstest.T, a *nstest.NS, an string, b *nstest.NS, bn string, queues int) {
	t.Helper()
	nstest.VethWith(t, a, an, b, bn, nstest.VethOptions{Rename: true, Queues: queues})
}

// MAC returns the hardware address of an interface in ns.
func MAC(t nstest.T, ns *nstest.NS, dev string) string {
	t.Helper()
	var links []struct {
		Address string `json:"address"`
	}
	out := nstest.Must(t, "ip", "-n", ns.Name, "-j", "link", "show", "dev", dev)
	if err := json.Unmarshal([]byte(out), &links); err != nil || len(links) != 1 {
		t.Fatalf("rig: MAC of %s in %s: %v: %s", dev, ns.Name, err, out)
	}
	return links[0].Address
}

// LinkStats are an interface's counters.
type LinkStats struct {
	RxPackets, RxDropped, TxPackets, TxDropped float64
}

// Links reads the counters of every interface of ns in one call.
func Links(ns *nstest.NS) (map[string]LinkStats, error) {
	out, err := exec.Command("ip", "-n", ns.Name, "-j", "-s", "link", "show").Output()
	if err != nil {
		return nil, fmt.Errorf("ip -s link in %s: %w", ns.Name, err)
	}
	var links []struct {
		Name  string `json:"ifname"`
		Stats struct {
			Rx struct {
				Packets float64 `json:"packets"`
				Dropped float64 `json:"dropped"`
			} `json:"rx"`
			Tx struct {
				Packets float64 `json:"packets"`
				Dropped float64 `json:"dropped"`
			} `json:"tx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		return nil, fmt.Errorf("ip -s link in %s: %w", ns.Name, err)
	}
	m := map[string]LinkStats{}
	for _, l := range links {
		m[l.Name] = LinkStats{l.Stats.Rx.Packets, l.Stats.Rx.Dropped, l.Stats.Tx.Packets, l.Stats.Tx.Dropped}
	}
	return m, nil
}

// Sysfs writes value to /sys/class/net/DEV/FILE inside ns (ip netns exec
// mounts the namespace's own sysfs).
func Sysfs(t nstest.T, ns *nstest.NS, dev, file, value string) {
	t.Helper()
	ns.Must(t, "sh", "-c", "echo "+value+" > /sys/class/net/"+dev+"/"+file)
}
