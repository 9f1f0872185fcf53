package testbed

import (
	"fmt"
	"net/netip"
	"path/filepath"

	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/testing/nstest"
)

// The ECMP bed: several vipd boxes behind one router, which runs BIRD and
// spreads the VIPs' traffic over the boxes by ECMP.
//
//	client ── router (BIRD) ──┬── ingress switch ── box1..boxN (eth0)
//	                          └── backend switch ── box1..boxN (eth1), backends
//
// The boxes share the router's segment (the case where no box may answer
// ARP for a VIP), and the backends' segment, where NAT backends send their
// replies over an ECMP default route through every box (the reverse
// translation needs no connection state, so any box will do) and DSR
// backends answer through the router.

// BoxAddr is box i's (0-based) address on the router's segment, and
// BoxEgressAddr its address on the backends'.
func BoxAddr(i int) netip.Addr       { return netip.AddrFrom4([4]byte{198, 18, 0, byte(2 + i)}) }
func BoxEgressAddr(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 18, 1, byte(1 + i)}) }

// RouterBackend is the router's address on the backends' segment.
var RouterBackend = netip.MustParseAddr("198.18.1.254")

// ECMPBed is a bed with several boxes; Bed.Box is the first.
type ECMPBed struct {
	*Bed
	Boxes   []*nstest.NS
	Ingress *nstest.NS // the router's segment (a bridge)
}

// NewECMP builds an ECMP bed with the given number of boxes and backends.
// The router hashes flows over equal paths by their 5-tuple
// (fib_multipath_hash_policy 3, fields 0x37: policy 1 reuses the sending
// socket's hash, which TCP re-rolls after a retransmission timeout, so
// flows would wander between boxes on their own).
func NewECMP(t nstest.T, boxes, backends int) *ECMPBed {
	t.Helper()
	return NewECMPWith(t, boxes, Options{Backends: backends})
}

// NewECMPWith is NewECMP with more of the bed's options (Backends,
// DecapArgs; the layout is two-armed, without IPv6).
func NewECMPWith(t nstest.T, boxes int, o Options) *ECMPBed {
	t.Helper()
	backends := o.Backends
	b := newBed(t, o)
	b.BackendNet, b.BoxEgress = netip.MustParsePrefix("198.18.1.0/24"), BoxEgressAddr(0)
	e := &ECMPBed{Bed: b}
	b.Switch = newSwitch(t, "sw")
	e.Ingress = newSwitch(t, "swi")
	b.Router.Sysctl(t, "net.ipv4.fib_multipath_hash_policy", "3")
	b.Router.Sysctl(t, "net.ipv4.fib_multipath_hash_fields", "0x37")
	b.Router.Sysctl(t, "net.ipv6.fib_multipath_hash_policy", "3")
	b.Router.Sysctl(t, "net.ipv6.fib_multipath_hash_fields", "0x37")

	e.ingressPort(b.Router, "r1", "srtr")
	b.Router.Must(t, "ip", "addr", "add", RouterBox.String()+"/24", "dev", "r1")
	b.port(b.Router, "r2", "srtr")
	b.Router.Must(t, "ip", "addr", "add", RouterBackend.String()+"/24", "dev", "r2")

	for i := 0; i < boxes; i++ {
		box := nstest.New(t, "box")
		box.Sysctl(t, "net.ipv4.ip_forward", "0")
		e.ingressPort(box, "eth0", fmt.Sprintf("sbox%d", i))
		b.port(box, "eth1", fmt.Sprintf("sbox%d", i))
		box.Must(t, "ip", "addr", "add", BoxAddr(i).String()+"/24", "dev", "eth0")
		box.Must(t, "ip", "addr", "add", BoxEgressAddr(i).String()+"/24", "dev", "eth1")
		box.Must(t, "ip", "route", "add", "default", "via", RouterBox.String())
		e.Boxes = append(e.Boxes, box)
	}
	b.Box = e.Boxes[0]
	for i := 0; i < backends; i++ {
		b.addBackend(i)
		// NAT replies: over every box (addBackend routed them through
		// the first).
		args := []string{"ip", "route", "replace", "default"}
		for j := range e.Boxes {
			args = append(args, "nexthop", "via", BoxEgressAddr(j).String())
		}
		b.Backends[i].NS.Must(t, args...)
	}
	b.noTxOffload("r0", "r1", "r2")
	return e
}

// ingressPort connects ns to the router's segment.
func (e *ECMPBed) ingressPort(ns *nstest.NS, name, swname string) {
	bridgePort(e.t, e.Ingress, ns, name, swname)
}

// BoxPath is where box i keeps what an installed vipd keeps at p (an
// absolute path such as /run/vipd/admin.sock): under a directory of the
// bed's that stands for the box's root, so that the bed never touches
// the machine's own /run and the boxes do not share files.
func (e *ECMPBed) BoxPath(i int, p string) string {
	return filepath.Join(e.dir, fmt.Sprintf("root%d", i), filepath.Clean("/"+p))
}

// BoxSocket is box i's admin socket, in the box's stand-in for
// /run/vipd, the directory systemd removes when vipd.service stops.
func (e *ECMPBed) BoxSocket(i int) string {
	return e.BoxPath(i, config.DefaultAdminSocket)
}

// BoxConfig is box i's vipd configuration: o for every box (the same
// VIPs, backends and seed: the boxes agree on every flow), with box i's
// admin socket and DSR encapsulation source, and extra appended.
func (e *ECMPBed) BoxConfig(i int, o ConfigOptions, extra string) string {
	o.AdminSocket = e.BoxSocket(i)
	o.EncapSource = BoxEgressAddr(i)
	o.StateFile = filepath.Join(e.dir, fmt.Sprintf("state%d.json", i))
	o.Extra += extra
	return e.Config(o)
}

// StartBox runs vipd in box i on cfg, written to box<i+1>.toml: the demos
// and their BIRD peers count boxes from 1, and an operator reading their
// output should find box1's file named so.
func (e *ECMPBed) StartBox(i int, cfg string) *VIPD {
	e.t.Helper()
	return e.StartVIPDIn(e.Boxes[i], fmt.Sprintf("box%d.toml", i+1), cfg)
}
