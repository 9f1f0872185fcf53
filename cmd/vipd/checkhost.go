package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"

	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/control/daemon"
	"github.com/vipd/vipd/dataplane/xdpprog"
	"github.com/vipd/vipd/dsr"
	"github.com/vipd/vipd/internal/offload"
)

// What -check-host reads of the machine; tests replace them.
var (
	lookupIface = net.InterfaceByName
	xdpFeatures = xdpprog.InterfaceFeatures
	txOffload   = offload.CheckInterfaces
)

// checkMachine is what -check-host adds to -check: that this machine has
// what the file names, as vipd will need it at start. Plain -check never
// fails for what the machine lacks (CI runs it anywhere); checkHost's
// checks, which it runs too, only catch a conflict with what the machine
// has. Here: each interface exists and is up; xdp_mode "native" has a
// driver that runs XDP; the interfaces' MTUs fit the frames and, for DSR,
// the encapsulation; a veth among them has its peer's TX checksum offload
// off, as vipd checks at start (a warning: it breaks NAT for what that
// peer sends); the admin socket's directory is a directory. Every
// error and warning goes to stderr, saying what to do; it returns false
// when there is an error (vipd would not start, or would not forward).
func checkMachine(cfg *config.Config, stderr io.Writer) bool {
	ok := true
	fail := func(format string, args ...any) {
		fmt.Fprintf(stderr, "vipd: "+format+"\n", args...)
		ok = false
	}
	warn := func(format string, args ...any) {
		fmt.Fprintf(stderr, "warning: "+format+"\n", args...)
	}
	dp := &cfg.Dataplane
	type iface struct {
		key string // the key that names it
		ifi *net.Interface
	}
	var ifaces []iface
	keys := []string{"ingress"}
	if dp.TwoArmed() {
		keys = append(keys, "egress")
	}
	for _, key := range keys {
		name := dp.Ingress
		if key == "egress" {
			name = dp.Egress
		}
		ifi, err := lookupIface(name)
		if err != nil {
			fail("[dataplane] %s = %q: no such interface on this machine (%v): name one that `ip link` lists", key, name, err)
			continue
		}
		switch {
		case ifi.Flags&net.FlagUp == 0:
			fail("[dataplane] %s = %q: the interface is down: bring it up (ip link set %s up)", key, name, name)
		case ifi.Flags&net.FlagRunning == 0:
			warn("[dataplane] %s = %q has no carrier (NO-CARRIER in `ip link`): vipd starts, but no packet arrives until the link comes up: check the cable or the peer", key, name)
		}
		ifaces = append(ifaces, iface{key, ifi})
	}
	if dp.IO == config.IOAFXDP && dp.XDPMode != config.XDPGeneric {
		for _, f := range ifaces {
			feat, err := xdpFeatures(f.ifi.Index)
			switch {
			case err != nil && dp.XDPMode == config.XDPNative:
				warn("could not tell whether the driver of %s runs XDP natively (%v): if vipd fails to attach its program, set [dataplane] xdp_mode = \"auto\"", f.ifi.Name, err)
			case err != nil:
			case feat&xdpprog.FeatureBasic == 0 && dp.XDPMode == config.XDPNative:
				fail("[dataplane] xdp_mode = \"native\": the driver of %s does not run XDP (the kernel reports no native XDP support): set xdp_mode = \"auto\" (generic mode, slower) or use a NIC whose driver has it", f.ifi.Name)
			case feat&xdpprog.FeatureBasic == 0:
				warn("the driver of %s does not run XDP natively: xdp_mode = \"auto\" attaches in generic mode, which is slower (and the fast path stays off)", f.ifi.Name)
			}
		}
	}
	mtus := make([]int, len(ifaces))
	for i, f := range ifaces {
		mtus[i] = f.ifi.MTU
	}
	frames := daemon.FramesFor(dp, mtus...)
	for _, f := range ifaces {
		checkFrame(frames, f.ifi, warn)
	}
	names := make([]string, len(ifaces))
	for i, f := range ifaces {
		names[i] = f.ifi.Name
	}
	for _, f := range txOffload(names) {
		warn("%s", f.Warning)
	}
	if len(ifaces) == len(keys) {
		egress := ifaces[len(ifaces)-1].ifi
		checkEncapMTU(cfg, ifaces[0].ifi, egress, fail, warn)
	}
	if s := cfg.Admin.Socket; s != "" {
		checkSocketDir(s, fail)
	}
	return ok
}

// checkFrame warns, as the daemon does at start (daemon checkMTU), when
// frames of the interface's MTU do not fit the driver's frames.
func checkFrame(frames daemon.Frames, ifi *net.Interface, warn func(string, ...any)) {
	if !frames.Fits(ifi.MTU) {
		warn("the MTU of %s (%d) is over what a %d-byte frame holds (%d bytes of IP): vipd drops longer packets; set [dataplane] frame_size = 4096 or lower the MTU (ip link set %s mtu %d)",
			ifi.Name, ifi.MTU, frames.Size, frames.MaxMTU(), ifi.Name, frames.MaxMTU())
	}
}

// checkEncapMTU checks that DSR packets fit the egress MTU (egress_mtu, or
// the interface's) once encapsulated: an error when not even the smallest
// packet every host must take (576 bytes IPv4, 1280 IPv6) fits, as
// config refuses such an egress_mtu; a warning when a full-size packet
// from the ingress interface does not, which then costs every client
// path MTU discovery.
func checkEncapMTU(cfg *config.Config, in, out *net.Interface, fail, warn func(string, ...any)) {
	mtu := out.MTU
	if cfg.Dataplane.EgressMTU != 0 {
		mtu = cfg.Dataplane.EgressMTU
	}
	for _, v := range cfg.VIPs {
		if v.Mode != config.ModeDSR {
			continue
		}
		six := v.Address.Is6()
		over, least, hinted := dsr.Overhead4, 576, dsr.OverheadHint4
		if six {
			over, least, hinted = dsr.Overhead6, 1280, dsr.OverheadHint6
		}
		if v.Encap == config.EncapGUE {
			over = map[bool]int{false: dsr.OverheadGUE4, true: dsr.OverheadGUE6}[six]
			if !v.HintsPreviousOwner() {
				hinted = over
			}
		} else {
			hinted = over
		}
		switch {
		case cfg.Dataplane.EgressMTU == 0 && mtu-hinted < least:
			fail("vip %q: the MTU of %s (%d) leaves %d bytes for packets inside %s's outer headers, under the %d every host must take: raise it to %d or more (ip link set %s mtu %d)",
				v.Name, out.Name, mtu, mtu-hinted, v.Encap, least, least+hinted, out.Name, least+hinted)
		case mtu-over < in.MTU:
			warn("vip %q: a full-size packet from %s (MTU %d) does not fit %s to the backends (egress MTU %d, %d bytes of outer headers): vipd answers it with ICMP fragmentation needed (packet too big), so clients must do path MTU discovery; to avoid it, raise the MTU of %s to %d",
				v.Name, in.Name, in.MTU, v.Encap, mtu, over, out.Name, in.MTU+over)
		}
	}
}

// checkSocketDir checks that the admin socket can be made: its directory
// is a directory (or, missing, can be created under one: vipd creates it
// at start, mode 0755), and the path is free or a socket.
func checkSocketDir(path string, fail func(string, ...any)) {
	dir := filepath.Dir(path)
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if errors.Is(err, fs.ErrNotExist) && d != filepath.Dir(d) {
			continue
		}
		if err != nil {
			fail("[admin] socket = %q: %v: run this as the user vipd runs as (root), or set another [admin] socket", path, err)
			return
		}
		if !fi.IsDir() {
			fail("[admin] socket = %q: %s is not a directory: remove it, or set another [admin] socket", path, d)
			return
		}
		break
	}
	if fi, err := os.Lstat(path); err == nil && fi.Mode().Type() != fs.ModeSocket {
		fail("[admin] socket = %q exists and is not a socket: vipd would not start; remove it, or set another [admin] socket", path)
	}
}
