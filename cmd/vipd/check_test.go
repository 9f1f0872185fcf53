package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipd/vipd/health/tunprobe"
	"github.com/vipd/vipd/internal/linkwatch"
)

// TestCheckHost: -check refuses a VIP that is one of this machine's
// addresses and warns about the public default flow-hash seed.
func TestCheckHost(t *testing.T) {
	const vip = `
[dataplane]
ingress = "eth0"
%s
[[vip]]
name = "web"
address = "198.18.0.100"
port = 80
[[vip.backend]]
address = "198.18.1.11"
`
	tests := []struct {
		name   string
		seed   string
		local  []netip.Addr
		err    error
		code   int
		errIn  string
		errOut string
	}{
		{"VIP on this machine", "flow_hash_seed = 7", []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("198.18.0.100")}, nil, 1, `vip "web": 198.18.0.100 is one of this machine's own addresses`, ""},
		{"VIP elsewhere", "flow_hash_seed = 7", []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil, 0, "", "warning"},
		{"default seed", "", nil, nil, 0, "flow_hash_seed is the public default", ""},
		{"addresses unreadable", "flow_hash_seed = 7", nil, errors.New("no netlink"), 0, "not checked whether a VIP is one of them", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orig := localAddrs
			localAddrs = func() ([]netip.Addr, error) { return tt.local, tt.err }
			t.Cleanup(func() { localAddrs = orig })
			path := filepath.Join(t.TempDir(), "v.toml")
			if err := os.WriteFile(path, []byte(strings.Replace(vip, "%s", tt.seed, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			if code := run([]string{"-check", "-config", path}, &stdout, &stderr); code != tt.code {
				t.Errorf("exit %d, want %d\n%s%s", code, tt.code, &stdout, &stderr)
			}
			if tt.errIn != "" && !strings.Contains(stderr.String(), tt.errIn) {
				t.Errorf("stderr lacks %q:\n%s", tt.errIn, &stderr)
			}
			if tt.errOut != "" && strings.Contains(stderr.String(), tt.errOut) {
				t.Errorf("stderr has %q:\n%s", tt.errOut, &stderr)
			}
		})
	}
}

// TestCheckRouterID: with [bgp] and no router_id, -check needs an IPv4
// address on the egress interface to take the router ID from.
func TestCheckRouterID(t *testing.T) {
	const cfg = `
[dataplane]
ingress = "eth0"
flow_hash_seed = 7
[bgp]
asn = 65010
%s
[[bgp.peer]]
address = "198.18.0.254"
asn = 65000
[[vip]]
name = "web"
address = "198.18.0.100"
port = 80
[[vip.backend]]
address = "198.18.1.11"
`
	v4 := linkwatch.Link{Name: "eth0", Addrs: []netip.Prefix{netip.MustParsePrefix("198.18.0.2/24")}}
	v6 := linkwatch.Link{Name: "eth0", Addrs: []netip.Prefix{netip.MustParsePrefix("2001:2::2/64")}}
	tests := []struct {
		name     string
		routerID string
		link     linkwatch.Link
		err      error
		code     int
		errIn    string
	}{
		{"egress has IPv4", "", v4, nil, 0, ""},
		{"egress without IPv4", "", v6, nil, 1, "has no IPv4 address"},
		{"router_id set", `router_id = "198.18.1.1"`, v6, nil, 0, ""},
		{"egress unreadable", "", linkwatch.Link{}, errors.New("no such link"), 0, "not checked"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			origA, origL := localAddrs, readLink
			localAddrs = func() ([]netip.Addr, error) { return nil, nil }
			readLink = func(string) (linkwatch.Link, error) { return tt.link, tt.err }
			t.Cleanup(func() { localAddrs, readLink = origA, origL })
			path := filepath.Join(t.TempDir(), "b.toml")
			if err := os.WriteFile(path, []byte(strings.Replace(cfg, "%s", tt.routerID, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			if code := run([]string{"-check", "-config", path}, &stdout, &stderr); code != tt.code {
				t.Errorf("exit %d, want %d\n%s%s", code, tt.code, &stdout, &stderr)
			}
			if tt.errIn != "" && !strings.Contains(stderr.String(), tt.errIn) {
				t.Errorf("stderr lacks %q:\n%s", tt.errIn, &stderr)
			}
		})
	}
}

// The tests never read this machine's reverse-path filter: -check's
// verdict on a file must not depend on the host that runs the tests.
func init() { rpFilter = func(string) error { return nil } }

// TestCheckRPFilter: -check refuses strict reverse-path filtering when
// IPv4 DSR backends are probed through their tunnels, and only then; an
// unreadable setting is a warning.
func TestCheckRPFilter(t *testing.T) {
	const cfg = `
[dataplane]
ingress = "eth0"
egress = "eth1"
flow_hash_seed = 7
[[vip]]
name = "dsr"
address = "198.18.0.101"
port = 80
mode = "dsr"
encap_source = "198.18.1.1"
[vip.healthcheck]
probe = "PROBE"
[[vip.backend]]
address = "198.18.1.11"
`
	strict := fmt.Errorf("%w: net.ipv4.conf.all.rp_filter=1", tunprobe.ErrRPFilter)
	tests := []struct {
		name, probe string
		rp          error
		code        int
		stderr      string
	}{
		{"tunnel, strict", "tunnel", strict, 1, `vip "dsr": probe = "tunnel": tunprobe: strict reverse-path filtering`},
		{"tunnel, loose", "tunnel", nil, 0, ""},
		{"tunnel, unreadable", "tunnel", errors.New("no eth1"), 0, "warning: could not read the reverse-path filter of eth1"},
		{"direct, strict", "direct", strict, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			origL, origR := localAddrs, rpFilter
			localAddrs = func() ([]netip.Addr, error) { return nil, nil }
			var asked string
			rpFilter = func(egress string) error { asked = egress; return tt.rp }
			t.Cleanup(func() { localAddrs, rpFilter = origL, origR })
			path := filepath.Join(t.TempDir(), "v.toml")
			if err := os.WriteFile(path, []byte(strings.Replace(cfg, "PROBE", tt.probe, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			if code := run([]string{"-check", "-config", path}, &stdout, &stderr); code != tt.code {
				t.Errorf("exit %d, want %d\n%s%s", code, tt.code, &stdout, &stderr)
			}
			if tt.stderr != "" && !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.stderr, &stderr)
			}
			if tt.stderr == "" && stderr.Len() != 0 {
				t.Errorf("stderr: %s", &stderr)
			}
			if tt.probe == "tunnel" && asked != "eth1" {
				t.Errorf("checked %q, want the egress interface eth1", asked)
			}
		})
	}
}

// TestCheckFleet: with [fleet], -check shows where the fleet is, does
// not warn about the seed (the fleet's, not the file's), and refuses a
// local [[vip]].
func TestCheckFleet(t *testing.T) {
	const fleet = `
[dataplane]
ingress = "eth0"

[fleet]
endpoints = ["https://10.0.0.1:2379"]
prefix = "/vipd/fleets/edge1/"
box = "lb1"
`
	orig := localAddrs
	localAddrs = func() ([]netip.Addr, error) { return nil, nil }
	t.Cleanup(func() { localAddrs = orig })
	for _, tt := range []struct {
		name, src, out, errIn string
		code                  int
	}{
		{"fleet", fleet, "fleet: /vipd/fleets/edge1/ on https://10.0.0.1:2379, box lb1", "", 0},
		{"local vip", fleet + "[[vip]]\nname = \"web\"\naddress = \"198.18.0.100\"\n", "", `[[vip]] "web" cannot be in the local file with [fleet] (line 5)`, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "v.toml")
			if err := os.WriteFile(path, []byte(tt.src), 0o644); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			if code := run([]string{"-check", "-config", path}, &stdout, &stderr); code != tt.code {
				t.Errorf("exit %d, want %d\n%s%s", code, tt.code, &stdout, &stderr)
			}
			if !strings.Contains(stdout.String(), tt.out) || !strings.Contains(stderr.String(), tt.errIn) {
				t.Errorf("stdout lacks %q or stderr lacks %q:\n%s%s", tt.out, tt.errIn, &stdout, &stderr)
			}
			if strings.Contains(stderr.String(), "public default") {
				t.Errorf("warns about the seed with [fleet]:\n%s", &stderr)
			}
		})
	}
}
