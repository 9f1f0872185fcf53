package main

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/dataplane/xdpprog"
	"github.com/vipd/vipd/internal/offload"
	"github.com/vipd/vipd/testing/nstest"
)

// fakeMachine replaces what -check-host reads of the machine with ifaces
// (by name), their XDP features (by index) and TX offload findings (by
// name), and this machine's addresses with none.
func fakeMachine(t *testing.T, ifaces map[string]net.Interface, feats map[int]xdpprog.Features, tx map[string]offload.Finding) {
	t.Helper()
	ol, of, oa, ot := lookupIface, xdpFeatures, localAddrs, txOffload
	t.Cleanup(func() { lookupIface, xdpFeatures, localAddrs, txOffload = ol, of, oa, ot })
	txOffload = func(names []string) []offload.Finding {
		var out []offload.Finding
		for _, n := range names {
			if f, ok := tx[n]; ok {
				out = append(out, f)
			}
		}
		return out
	}
	lookupIface = func(name string) (*net.Interface, error) {
		if i, ok := ifaces[name]; ok {
			i.Name = name
			return &i, nil
		}
		return nil, errors.New("route ip+net: no such network interface")
	}
	xdpFeatures = func(index int) (xdpprog.Features, error) {
		if f, ok := feats[index]; ok {
			return f, nil
		}
		return 0, xdpprog.ErrNoFeatures
	}
	localAddrs = func() ([]netip.Addr, error) { return nil, nil }
}

func TestCheckHostFlag(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	const head = "[dataplane]\ningress = \"eth0\"\nflow_hash_seed = 7\n"
	sock := "[admin]\nlisten = \"\"\nsocket = \"" + filepath.Join(dir, "run", "admin.sock") + "\"\n"
	nat := "[[vip]]\nname = \"web\"\naddress = \"198.18.0.100\"\nport = 80\n[vip.healthcheck]\ntype = \"none\"\n[[vip.backend]]\naddress = \"198.18.1.11\"\n"
	dsr6 := "[[vip]]\nname = \"v6\"\naddress = \"2001:db8::1\"\nport = 80\nmode = \"dsr\"\nencap = \"gue\"\nencap_source = \"2001:db8::2\"\n[vip.healthcheck]\ntype = \"none\"\n[[vip.backend]]\naddress = \"2001:db8::11\"\n"
	dsr4 := "[[vip]]\nname = \"v4\"\naddress = \"198.18.0.101\"\nport = 80\nmode = \"dsr\"\nencap_source = \"198.18.1.1\"\n[vip.healthcheck]\ntype = \"none\"\n[[vip.backend]]\naddress = \"198.18.1.12\"\n"
	up := net.FlagUp | net.FlagRunning
	eth0 := map[string]net.Interface{"eth0": {Index: 2, MTU: 1500, Flags: up}}
	native := map[int]xdpprog.Features{2: xdpprog.FeatureBasic | xdpprog.FeatureRedirect}
	tests := []struct {
		name   string
		src    string
		ifaces map[string]net.Interface
		feats  map[int]xdpprog.Features
		code   int
		stderr []string
	}{
		{"fine", head + sock + nat, eth0, native, 0, nil},
		{"no such interface", strings.Replace(head, "eth0", "eth9", 1) + sock + nat, eth0, native, 1,
			[]string{`vipd: [dataplane] ingress = "eth9": no such interface on this machine`, "name one that `ip link` lists"}},
		{"egress missing", head + "egress = \"eth1\"\n" + sock + nat, eth0, native, 1, []string{`[dataplane] egress = "eth1": no such interface`}},
		{"down", head + sock + nat, map[string]net.Interface{"eth0": {Index: 2, MTU: 1500}}, native, 1, []string{"the interface is down: bring it up (ip link set eth0 up)"}},
		{"no carrier", head + sock + nat, map[string]net.Interface{"eth0": {Index: 2, MTU: 1500, Flags: net.FlagUp}}, native, 0, []string{"warning: [dataplane] ingress = \"eth0\" has no carrier"}},
		{"native unsupported", head + "xdp_mode = \"native\"\n" + sock + nat, eth0, map[int]xdpprog.Features{2: 0}, 1, []string{`xdp_mode = "native": the driver of eth0 does not run XDP`, `set xdp_mode = "auto"`}},
		{"native unknown", head + "xdp_mode = \"native\"\n" + sock + nat, eth0, nil, 0, []string{"warning: could not tell whether the driver of eth0 runs XDP natively"}},
		{"auto falls back", head + sock + nat, eth0, map[int]xdpprog.Features{2: 0}, 0, []string{"attaches in generic mode"}},
		{"jumbo frames", head + sock + nat, map[string]net.Interface{"eth0": {Index: 2, MTU: 9000, Flags: up}}, native, 0, []string{"the MTU of eth0 (9000) is over what a 4096-byte frame holds"}},
		{"IPv6 GUE under 1280", head + sock + dsr6, map[string]net.Interface{"eth0": {Index: 2, MTU: 1300, Flags: up}}, native, 1,
			[]string{`vip "v6": the MTU of eth0 (1300) leaves`, "raise it to 1352 or more (ip link set eth0 mtu 1352)"}},
		{"IPv4 IPIP full size", head + sock + dsr4, eth0, native, 0, []string{`warning: vip "v4": a full-size packet from eth0 (MTU 1500) does not fit ipip`, "raise the MTU of eth0 to 1520"}},
		{"socket directory a file", head + "[admin]\nlisten = \"\"\nsocket = \"" + filepath.Join(notDir, "admin.sock") + "\"\n" + nat, eth0, native, 1,
			[]string{"is not a directory: remove it, or set another [admin] socket"}},
		{"socket path a file", head + "[admin]\nlisten = \"\"\nsocket = \"" + notDir + "\"\n" + nat, eth0, native, 1, []string{"exists and is not a socket"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fakeMachine(t, tt.ifaces, tt.feats, nil)
			path := filepath.Join(t.TempDir(), "v.toml")
			if err := os.WriteFile(path, []byte(tt.src), 0o644); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			if code := run([]string{"-check-host", "-config", path}, &stdout, &stderr); code != tt.code {
				t.Errorf("exit %d, want %d\n%s%s", code, tt.code, &stdout, &stderr)
			}
			for _, w := range tt.stderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, &stderr)
				}
			}
			if tt.stderr == nil && stderr.Len() > 0 {
				t.Errorf("stderr: %s", &stderr)
			}
			// Plain -check looks at none of it: CI runs it anywhere.
			stdout.Reset()
			stderr.Reset()
			if code := run([]string{"-check", "-config", path}, &stdout, &stderr); code != 0 {
				t.Errorf("-check: exit %d\n%s", code, &stderr)
			}
		})
	}
}

// TestCheckHostFlagTxOffload: what offload.CheckInterfaces finds on the
// file's interfaces is a warning of -check-host, in the words vipd logs
// at start; plain -check does not look.
func TestCheckHostFlagTxOffload(t *testing.T) {
	w := "eth0 is a veth whose peer v1 (in this namespace) has TX checksum offload on: ...; fix: ethtool -K v1 tx off"
	fakeMachine(t, map[string]net.Interface{"eth0": {Index: 2, MTU: 1500, Flags: net.FlagUp | net.FlagRunning}},
		map[int]xdpprog.Features{2: xdpprog.FeatureBasic}, map[string]offload.Finding{"eth0": {Interface: "eth0", Warning: w, Fix: "ethtool -K v1 tx off"}})
	path := filepath.Join(t.TempDir(), "v.toml")
	src := "[dataplane]\ningress = \"eth0\"\nflow_hash_seed = 7\n[admin]\nlisten = \"\"\nsocket = \"\"\n"
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"-check-host", "-check"} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{flag, "-config", path}, &stdout, &stderr); code != 0 {
			t.Errorf("%s: exit %d\n%s", flag, code, &stderr)
		}
		if got := strings.Contains(stderr.String(), "warning: "+w+"\n"); got != (flag == "-check-host") {
			t.Errorf("%s: stderr %q: the warning shown %v", flag, &stderr, got)
		}
	}
}

// TestCheckHostInNamespace: -check-host reads the real interfaces, in a
// namespace of the test's own: a missing one, one that is down, one
// without carrier (its veth peer down).
func TestCheckHostInNamespace(t *testing.T) {
	nstest.RequireRoot(t)
	ns := nstest.New(t, "chk")
	ns.Must(t, "ip", "link", "add", "vipdchk0", "type", "veth", "peer", "name", "vipdchk1")
	cfg := func(ingress string) *config.Config {
		src := "[dataplane]\ningress = \"" + ingress + "\"\nxdp_mode = \"generic\"\n[admin]\nlisten = \"\"\nsocket = \"\"\n"
		c, _, err := config.Parse("ns.toml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	check := func(ingress string) (bool, string) {
		var stderr bytes.Buffer
		var ok bool
		if err := ns.Do(func() error { ok = checkMachine(cfg(ingress), &stderr); return nil }); err != nil {
			t.Fatal(err)
		}
		return ok, stderr.String()
	}
	if ok, out := check("eth9"); ok || !strings.Contains(out, `ingress = "eth9": no such interface`) {
		t.Errorf("missing interface: ok %v, %s", ok, out)
	}
	if ok, out := check("vipdchk0"); ok || !strings.Contains(out, "ip link set vipdchk0 up") {
		t.Errorf("interface down: ok %v, %s", ok, out)
	}
	ns.Must(t, "ip", "link", "set", "vipdchk0", "up")
	if ok, out := check("vipdchk0"); !ok || !strings.Contains(out, "has no carrier") {
		t.Errorf("interface up, its peer down: ok %v, %s", ok, out)
	}
	ns.Must(t, "ip", "link", "set", "vipdchk1", "up")
	ns.WaitRunning(t, "vipdchk0")
	// A veth's peer has TX checksumming on by default
	// (TestCheckHostTxOffload).
	if err := ns.Do(func() error { return offload.SetTxChecksum("vipdchk1", false) }); err != nil {
		t.Fatal(err)
	}
	if ok, out := check("vipdchk0"); !ok || out != "" {
		t.Errorf("interface up: ok %v, %s", ok, out)
	}
}

// TestCheckHostTxOffload: -check-host warns, as vipd does at start and
// with the same fix, of an interface that is a veth whose peer has TX
// checksum offload on (NAT breaks for what the peer sends), with the peer
// in the box's namespace or in another one (a container's); with the
// offload off it says nothing.
func TestCheckHostTxOffload(t *testing.T) {
	nstest.RequireRoot(t)
	box := nstest.New(t, "chk")
	ctr := nstest.New(t, "ctr")
	near, peer := nstest.Name("va"), nstest.Name("vb")
	nstest.Veth(t, box, near, box, peer)
	nstest.VethNamed(t, box, "eth0", ctr, "eth0")
	t.Cleanup(func() { exec.Command("ip", "-n", box.Name, "link", "del", "eth0").Run() })
	setTx := func(ns *nstest.NS, ifname string, on bool) {
		t.Helper()
		if err := ns.Do(func() error { return offload.SetTxChecksum(ifname, on) }); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name          string
		ingress       string
		peerNS        *nstest.NS
		peer, warning string
	}{
		{"peer in the box's namespace", near, box, peer,
			"warning: " + near + " is a veth whose peer " + peer + " (in this namespace) has TX checksum offload on: " +
				"frames it sends reach vipd with partial checksums, NAT forwards TCP segments with wrong checksums and those connections hang " +
				"without any drop being counted; fix: ethtool -K " + peer + " tx off\n"},
		{"peer in another namespace", "eth0", ctr, "eth0",
			"warning: eth0 is a veth whose peer eth0 (in netns " + ctr.Name + ") has TX checksum offload on: " +
				"frames it sends reach vipd with partial checksums, NAT forwards TCP segments with wrong checksums and those connections hang " +
				"without any drop being counted; fix: ip netns exec " + ctr.Name + " ethtool -K eth0 tx off\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := config.Parse("ns.toml", []byte("[dataplane]\ningress = \""+tc.ingress+"\"\nxdp_mode = \"generic\"\n[admin]\nlisten = \"\"\nsocket = \"\"\n"))
			if err != nil {
				t.Fatal(err)
			}
			check := func() (bool, string) {
				var stderr bytes.Buffer
				var ok bool
				if err := box.Do(func() error { ok = checkMachine(cfg, &stderr); return nil }); err != nil {
					t.Fatal(err)
				}
				return ok, stderr.String()
			}
			setTx(tc.peerNS, tc.peer, true)
			if ok, out := check(); !ok || out != tc.warning {
				t.Errorf("TX checksum offload on: ok %v, stderr\n%s\nwant\n%s", ok, out, tc.warning)
			}
			setTx(tc.peerNS, tc.peer, false)
			if ok, out := check(); !ok || out != "" {
				t.Errorf("TX checksum offload off: ok %v, stderr\n%s", ok, out)
			}
		})
	}
}
