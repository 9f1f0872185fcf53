package daemon

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/dataplane/xdpprog"
	"github.com/vipd/vipd/internal/linkwatch"
)

// TestFastPathRuns: "on" and "off" are obeyed; "auto" runs the fast path
// only on XDP in the driver, a refresh shorter than the timeouts, no
// veth, and drivers whose features carry what it sends (XDP_TX one-armed;
// redirects both ways two-armed), and otherwise says why.
func TestFastPathRuns(t *testing.T) {
	const basic, redirect, target = xdpprog.FeatureBasic, xdpprog.FeatureRedirect, xdpprog.FeatureNDOXmit
	nic := func(name string, f xdpprog.Features) fastLink {
		return fastLink{link: linkwatch.Link{Name: name}, features: f}
	}
	veth := fastLink{link: linkwatch.Link{Name: "veth0", Kind: "veth"}, features: basic | redirect | target}
	unknown := fastLink{link: linkwatch.Link{Name: "eth9"}, err: errors.New("no netdev family")}
	for _, tc := range []struct {
		name  string
		mode  config.FastPathMode
		edit  func(*config.Config)
		links []fastLink
		runs  bool
		why   string // a word of the reason when it does not run
	}{
		{"auto, one-armed NIC with XDP_TX", config.FastPathAuto, nil, []fastLink{nic("eth0", basic)}, true, ""},
		{"auto, two-armed NICs with redirects", config.FastPathAuto, nil, []fastLink{nic("eth0", basic|redirect|target), nic("eth1", basic|redirect|target)}, true, ""},
		{"auto, egress no redirect target", config.FastPathAuto, nil, []fastLink{nic("eth0", basic|redirect|target), nic("eth1", basic|redirect)}, false, "eth1"},
		{"auto, ingress cannot redirect", config.FastPathAuto, nil, []fastLink{nic("eth0", basic|target), nic("eth1", basic|redirect|target)}, false, "eth0"},
		{"auto, no XDP in the driver", config.FastPathAuto, nil, []fastLink{nic("eth0", 0)}, false, "lacks"},
		{"auto, veth", config.FastPathAuto, nil, []fastLink{veth}, false, "veth"},
		{"auto, features unknown", config.FastPathAuto, nil, []fastLink{unknown}, false, "unknown"},
		{"auto, generic mode", config.FastPathAuto, func(c *config.Config) { c.Dataplane.XDPMode = config.XDPGeneric }, []fastLink{nic("eth0", basic)}, false, "generic"},
		{"auto, refresh too long", config.FastPathAuto, func(c *config.Config) { c.Conntrack.TCPClosing = config.Duration(time.Second) }, []fastLink{nic("eth0", basic)}, false, "refresh"},
		{"auto, AF_PACKET", config.FastPathAuto, func(c *config.Config) { c.Dataplane.IO = config.IOAFPacket }, []fastLink{nic("eth0", basic)}, false, "afxdp"},
		{"on, veth", config.FastPathOn, nil, []fastLink{veth}, true, ""},
		{"off, NIC", config.FastPathOff, nil, []fastLink{nic("eth0", basic)}, false, "off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := new(config.Config)
			*cfg = config.Default()
			cfg.Dataplane.FastPath = tc.mode
			if tc.edit != nil {
				tc.edit(cfg)
			}
			runs, why := fastPathRuns(&cfg.Dataplane, &cfg.Conntrack, tc.links)
			if runs != tc.runs || !strings.Contains(why, tc.why) || !runs && why == "" {
				t.Errorf("runs %v (%q), want %v (a reason naming %q)", runs, why, tc.runs, tc.why)
			}
		})
	}
}
