package testbed

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/vipd/vipd/testing/nstest"
)

// EchoPort is where the backends run a TCP echo server (the name and a
// newline first), for long-lived connections that stream both ways.
const EchoPort = 7

// Addresses of the bed.
var (
	ClientAddr = netip.MustParseAddr("198.18.2.1")
	RouterCli  = netip.MustParseAddr("198.18.2.254")
	RouterBox  = netip.MustParseAddr("198.18.0.254")
	BoxIngress = netip.MustParseAddr("198.18.0.2")
	VIPNAT     = netip.MustParseAddr("198.18.0.100")
	VIPDSR     = netip.MustParseAddr("198.18.0.101")
	VIPUDP     = netip.MustParseAddr("198.18.0.102")

	// IPv6 (Options.IPv6), from the benchmarking range 2001:2::/48 (RFC 5180).
	ClientAddr6 = netip.MustParseAddr("2001:2:2::1")
	BoxIngress6 = netip.MustParseAddr("2001:2::2")
	BoxEgress6  = netip.MustParseAddr("2001:2:1::1")
	VIPNAT6     = netip.MustParseAddr("2001:2::100")
	VIPDSR6     = netip.MustParseAddr("2001:2::101")
)

// Layout is the shape of the box's connections.
type Layout int

const (
	TwoArmed Layout = iota // eth0 toward clients, eth1 toward backends
	OneArmed               // eth0 for both
)

// Options shape a bed.
type Options struct {
	Layout   Layout
	Backends int // default 3
	// BoxEgressMTU is the MTU of the box's eth1 (and its switch port):
	// the link toward the backends is smaller than the client's, while the
	// backends keep 1500 and advertise the MSS that goes with it. 0 means
	// 1500. Two-armed only.
	BoxEgressMTU int
	// ClientLinkMTU is the MTU of the router's interface toward the client
	// (the client keeps 1500): the router then sends ICMP
	// fragmentation-needed for large packets toward the client. 0 means
	// 1500.
	ClientLinkMTU int
	// NoDecap skips the DSR decapsulator on the backends; DecapArgs are
	// more flags for it.
	NoDecap   bool
	DecapArgs []string
	// XDPPeers gives the veths that face the box (the router's and the
	// switch's) an XDP program that passes everything, so that they take
	// frames the box's XDP program sends (vipd's fast path: XDP_TX,
	// bpf_redirect), which a veth without one loses (nstest.XDPPass).
	XDPPeers bool
	// IPv6 adds IPv6 addressing and routes next to IPv4 (two-armed only):
	// client 2001:2:2::1, box 2001:2::2 and 2001:2:1::1, backends
	// 2001:2:1::11.., VIPs 2001:2::100 (NAT) and 2001:2::101 (DSR).
	IPv6 bool
}

// Backend is one backend host.
type Backend struct {
	Name  string
	NS    *nstest.NS
	Addr  netip.Addr
	Addr6 netip.Addr // with Options.IPv6
	srv   *exec.Cmd
	bed   *Bed
}

// Bed is a running test network.
type Bed struct {
	t        nstest.T
	Opts     Options
	Bin      Binaries
	Client   *nstest.NS
	Router   *nstest.NS
	Box      *nstest.NS
	Switch   *nstest.NS
	Backends []*Backend
	// BackendNet is the backends' subnet, BoxEgress the box's address on
	// it (the NAT backends' gateway).
	BackendNet netip.Prefix
	BoxEgress  netip.Addr
	dir        string
}

// New builds the bed. It needs root; tests call nstest.RequireRoot first.
func New(t nstest.T, o Options) *Bed {
	t.Helper()
	if o.Backends == 0 {
		o.Backends = 3
	}
	b := newBed(t, o)
	b.Box = nstest.New(t, "box")
	b.Switch = newSwitch(t, "sw")
	b.Box.Sysctl(t, "net.ipv4.ip_forward", "0")
	if o.ClientLinkMTU != 0 {
		b.Router.Must(t, "ip", "link", "set", "r0", "mtu", strconv.Itoa(o.ClientLinkMTU))
	}

	if o.Layout == TwoArmed {
		b.BackendNet = netip.MustParsePrefix("198.18.1.0/24")
		b.BoxEgress = netip.MustParseAddr("198.18.1.1")
		nstest.VethNamed(t, b.Router, "r1", b.Box, "eth0")
		b.port(b.Box, "eth1", "sbox")
		b.port(b.Router, "r2", "srtr")
		b.Box.Must(t, "ip", "addr", "add", b.BoxEgress.String()+"/24", "dev", "eth1")
		b.Router.Must(t, "ip", "addr", "add", "198.18.1.254/24", "dev", "r2")
		if o.BoxEgressMTU != 0 {
			mtu := strconv.Itoa(o.BoxEgressMTU)
			b.Box.Must(t, "ip", "link", "set", "eth1", "mtu", mtu)
			b.Switch.Must(t, "ip", "link", "set", "sbox", "mtu", mtu)
		}
	} else {
		b.BackendNet = netip.MustParsePrefix("198.18.0.0/24")
		b.BoxEgress = BoxIngress
		b.port(b.Router, "r1", "srtr")
		b.port(b.Box, "eth0", "sbox")
	}
	b.Router.Must(t, "ip", "addr", "add", RouterBox.String()+"/24", "dev", "r1")
	b.Box.Must(t, "ip", "addr", "add", BoxIngress.String()+"/24", "dev", "eth0")
	b.Box.Must(t, "ip", "route", "add", "default", "via", RouterBox.String())

	if o.IPv6 {
		b.addIPv6()
	}
	for i := 0; i < o.Backends; i++ {
		b.addBackend(i)
	}
	routerDevs := []string{"r0", "r1"}
	if o.Layout == TwoArmed {
		routerDevs = append(routerDevs, "r2")
	}
	b.noTxOffload(routerDevs...)
	if o.XDPPeers {
		b.Switch.XDPPass(t, "sbox")
		if o.Layout == TwoArmed {
			b.Router.XDPPass(t, "r1")
		}
	}
	return b
}

// newBed is what every bed starts with: the binaries built, what a run
// killed before its cleanups left behind swept, the bed's directory, and
// the client and the router (forwarding) joined by their link:
//
//	client eth0 198.18.2.1/24 (default route) ──veth── r0 198.18.2.254/24 router
func newBed(t nstest.T, o Options) *Bed {
	t.Helper()
	bin, err := Build()
	if err != nil {
		t.Fatalf("testbed: %v", err)
	}
	nstest.SweepStale()
	SweepStaleDirs()
	dir, err := os.MkdirTemp("", dirPrefix("vipd-bed"))
	if err != nil {
		t.Fatalf("testbed: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	b := &Bed{t: t, Opts: o, Bin: bin, dir: dir}
	b.Client = nstest.New(t, "cli")
	b.Router = nstest.New(t, "rtr")
	b.Router.Sysctl(t, "net.ipv4.ip_forward", "1")
	nstest.VethNamed(t, b.Client, "eth0", b.Router, "r0")
	b.Client.Must(t, "ip", "addr", "add", ClientAddr.String()+"/24", "dev", "eth0")
	b.Client.Must(t, "ip", "route", "add", "default", "via", RouterCli.String())
	b.Router.Must(t, "ip", "addr", "add", RouterCli.String()+"/24", "dev", "r0")
	return b
}

// newSwitch makes a namespace whose bridge br0 is up: a switch, whose
// ports bridgePort adds.
func newSwitch(t nstest.T, prefix string) *nstest.NS {
	t.Helper()
	sw := nstest.New(t, prefix)
	sw.Must(t, "ip", "link", "add", "br0", "type", "bridge")
	sw.Must(t, "ip", "link", "set", "br0", "up")
	return sw
}

// noTxOffload makes every interface that sends toward the boxes — the
// client's, the router's routerDevs, the backends' — send whole frames
// with complete checksums, as a physical wire does (see
// nstest.NoTxOffload).
func (b *Bed) noTxOffload(routerDevs ...string) {
	b.Client.NoTxOffload(b.t, "eth0")
	for _, dev := range routerDevs {
		b.Router.NoTxOffload(b.t, dev)
	}
	for _, be := range b.Backends {
		be.NS.NoTxOffload(b.t, "eth0")
	}
}

// port connects a namespace to the switch with a veth named name (inside
// ns) and swname (on the bridge).
func (b *Bed) port(ns *nstest.NS, name, swname string) {
	bridgePort(b.t, b.Switch, ns, name, swname)
}

// bridgePort connects ns to the bridge br0 of namespace sw with a veth
// named name (inside ns) and swname (on the bridge).
func bridgePort(t nstest.T, sw, ns *nstest.NS, name, swname string) {
	nstest.VethNamed(t, ns, name, sw, swname)
	sw.Must(t, "ip", "link", "set", swname, "master", "br0")
}

func (b *Bed) addBackend(i int) {
	t := b.t
	be := &Backend{Name: fmt.Sprintf("backend%d", i+1), bed: b}
	be.NS = nstest.New(t, "be")
	a := b.BackendNet.Addr().As4()
	a[3] = byte(11 + i)
	be.Addr = netip.AddrFrom4(a)
	b.port(be.NS, "eth0", fmt.Sprintf("sbe%d", i))
	bits := b.BackendNet.Bits()
	be.NS.Must(t, "ip", "addr", "add", fmt.Sprintf("%s/%d", be.Addr, bits), "dev", "eth0")
	// NAT replies go back through the box; DSR replies (source: the VIP)
	// straight to the router.
	be.NS.Must(t, "ip", "route", "add", "default", "via", b.BoxEgress.String())
	routerHere := "198.18.1.254"
	if b.Opts.Layout == OneArmed {
		routerHere = RouterBox.String()
	}
	be.NS.Must(t, "ip", "route", "add", "default", "via", routerHere, "table", "100")
	be.NS.Must(t, "ip", "rule", "add", "from", VIPDSR.String(), "lookup", "100")
	// The DSR VIP lives on loopback and must not be announced.
	be.NS.Must(t, "ip", "addr", "add", VIPDSR.String()+"/32", "dev", "lo")
	be.NS.Sysctl(t, "net.ipv4.conf.all.arp_ignore", "1")
	be.NS.Sysctl(t, "net.ipv4.conf.all.arp_announce", "2")
	// vipd-decap accepts the boxes' encapsulation sources only. On the
	// backends' segment the boxes hold .1 to .7 (the egress address,
	// ECMP box i's .1+i, the encap_source_prefix 198.18.1.0/29 of the
	// tests; one-armed, the box's .2), the backends .11 on; IPv6 alike.
	allow := netip.PrefixFrom(b.BackendNet.Addr(), 29).String()
	if b.Opts.IPv6 {
		allow += "," + netip.PrefixFrom(BoxEgress6, 125).Masked().String()
	}
	decapArgs := []string{"-fix-sysctls", "-allow", allow}
	if b.Opts.IPv6 {
		be.Addr6 = netip.AddrFrom16([16]byte{0x20, 0x01, 0, 2, 0, 1, 15: byte(0x11 + i)})
		v6 := func(args ...string) { be.NS.Must(t, append([]string{"ip", "-6"}, args...)...) }
		v6("addr", "add", be.Addr6.String()+"/64", "dev", "eth0", "nodad")
		v6("route", "add", "default", "via", BoxEgress6.String())
		v6("route", "add", "default", "via", "2001:2:1::fe", "table", "100")
		v6("rule", "add", "from", VIPDSR6.String(), "lookup", "100")
		v6("addr", "add", VIPDSR6.String()+"/128", "dev", "lo", "nodad")
		decapArgs = append(decapArgs, "-ipv6")
	}
	decapArgs = append(decapArgs, b.Opts.DecapArgs...)
	b.Backends = append(b.Backends, be)
	be.Start()
	if !b.Opts.NoDecap {
		b.Spawn(be.NS, "decap-"+be.Name, b.Bin.Decap, decapArgs...)
	}
}

// addIPv6 gives the client, router and box their IPv6 addresses and routes
// (two-armed layout). Addresses skip duplicate address detection, which
// would hold them tentative for a second or two.
func (b *Bed) addIPv6() {
	t := b.t
	if b.Opts.Layout != TwoArmed {
		t.Fatalf("testbed: IPv6 is set up for the two-armed layout only")
	}
	b.Router.Sysctl(t, "net.ipv6.conf.all.forwarding", "1")
	b.Box.Sysctl(t, "net.ipv6.conf.all.forwarding", "0")
	add := func(ns *nstest.NS, addr, dev string) {
		ns.Must(t, "ip", "-6", "addr", "add", addr, "dev", dev, "nodad")
	}
	add(b.Client, ClientAddr6.String()+"/64", "eth0")
	b.Client.Must(t, "ip", "-6", "route", "add", "default", "via", "2001:2:2::fe")
	add(b.Router, "2001:2:2::fe/64", "r0")
	add(b.Router, "2001:2::fe/64", "r1")
	add(b.Router, "2001:2:1::fe/64", "r2")
	add(b.Box, BoxIngress6.String()+"/64", "eth0")
	add(b.Box, BoxEgress6.String()+"/64", "eth1")
	b.Box.Must(t, "ip", "-6", "route", "add", "default", "via", "2001:2::fe")
}

// Start (re)starts the backend's server: HTTP on 8080 (NAT) and 80 (DSR:
// no port rewrite), UDP echo on 7001.
func (be *Backend) Start() {
	be.srv = be.bed.Spawn(be.NS, be.Name, be.bed.Bin.Backend, "-name", be.Name, "-http", ":8080,:80", "-udp", ":7001",
		"-echo", fmt.Sprintf(":%d", EchoPort), "-drain-file", be.DrainFile(),
		"-load-file", be.ctlFile("load"), "-fail-file", be.ctlFile("fail"))
}

// ctlFile is the file through which the test controls the backend's
// health answers (load, fail).
func (be *Backend) ctlFile(what string) string {
	return filepath.Join(be.bed.dir, be.Name+"."+what)
}

// SetLoad makes the backend's health check answer with header X-Load:
// value (a utilization from 0 to 1, or anything, to test malformed
// reports); "" removes the header.
func (be *Backend) SetLoad(value string) {
	if value == "" {
		os.Remove(be.ctlFile("load"))
		return
	}
	writeAtomic(be.ctlFile("load"), value)
}

// writeAtomic replaces file with content, so that a reader never sees
// half of it.
func writeAtomic(file, content string) {
	os.WriteFile(file+".tmp", []byte(content), 0o644)
	os.Rename(file+".tmp", file)
}

// SetCheckFailures makes every nth health check of the backend answer
// 500; 0 stops the failures.
func (be *Backend) SetCheckFailures(n int) {
	if n <= 0 {
		os.Remove(be.ctlFile("fail"))
		return
	}
	writeAtomic(be.ctlFile("fail"), strconv.Itoa(n))
}

// Kill stops the backend's server (SIGKILL), as a crash would.
func (be *Backend) Kill() {
	if be.srv != nil && be.srv.Process != nil {
		be.srv.Process.Kill()
		be.srv.Wait()
		be.srv = nil
	}
}

// DrainFile is the file whose existence makes the backend's health check
// answer 503 with X-Drain.
func (be *Backend) DrainFile() string { return filepath.Join(be.bed.dir, be.Name+".drain") }

// SetDraining makes the backend answer its health check as draining, or
// not.
func (be *Backend) SetDraining(on bool) {
	if on {
		os.WriteFile(be.DrainFile(), nil, 0o644)
	} else {
		os.Remove(be.DrainFile())
	}
}

// Spawn starts a program inside ns; it is killed (by PID) at cleanup. Its
// output goes to a log file in the bed's directory (see Log).
func (b *Bed) Spawn(ns *nstest.NS, name, bin string, args ...string) *exec.Cmd {
	b.t.Helper()
	f, err := os.Create(filepath.Join(b.dir, name+".log"))
	if err != nil {
		b.t.Fatalf("testbed: %v", err)
	}
	cmd := ns.Cmd(append([]string{bin}, args...)...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		b.t.Fatalf("testbed: start %s: %v", name, err)
	}
	b.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		f.Close()
	})
	return cmd
}

// Log returns what a spawned program wrote so far.
func (b *Bed) Log(name string) string {
	out, _ := os.ReadFile(filepath.Join(b.dir, name+".log"))
	return string(out)
}

// Dialer returns a dial function that opens connections from inside ns.
func Dialer(ns *nstest.NS) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := ns.Do(func() error {
			var d net.Dialer
			var err error
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// ListenPacket opens a packet socket inside ns.
func ListenPacket(ns *nstest.NS, network, addr string) (net.PacketConn, error) {
	var pc net.PacketConn
	err := ns.Do(func() error {
		var err error
		pc, err = net.ListenPacket(network, addr)
		return err
	})
	return pc, err
}

// stopProcess sends SIGTERM and waits up to d for the process to exit.
func stopProcess(cmd *exec.Cmd, d time.Duration) (*os.ProcessState, error) {
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		return cmd.ProcessState, nil
	case <-time.After(d):
		cmd.Process.Kill()
		<-done
		return cmd.ProcessState, fmt.Errorf("did not exit within %v of SIGTERM", d)
	}
}
