package daemon

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/config"
	"github.com/vipd/vipd/conntrack"
	"github.com/vipd/vipd/dataplane"
	"github.com/vipd/vipd/dataplane/xdpprog"
	"github.com/vipd/vipd/linkwatch"
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

// TestFastWriterLifetimes: an entry serves fast_path_refresh (less the
// program's clock slack); a Brief one, for a flow not proven yet, a
// conntrack tick at most; a Retire one not at all (Expires in the past).
func TestFastWriterLifetimes(t *testing.T) {
	const slack = 20 * time.Millisecond
	for _, tc := range []struct {
		name    string
		refresh time.Duration
		flow    dataplane.FastFlow
		want    time.Duration // -1: already expired
	}{
		{"proven", 5 * time.Second, dataplane.FastFlow{}, 5*time.Second - slack},
		{"brief", 5 * time.Second, dataplane.FastFlow{Brief: true}, time.Second - slack},
		{"brief, refresh shorter than a tick", 300 * time.Millisecond, dataplane.FastFlow{Brief: true}, 300*time.Millisecond - slack},
		{"retired", 5 * time.Second, dataplane.FastFlow{Retire: true, Brief: true}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fastWriter{refresh: int64(tc.refresh - slack), brief: int64(conntrack.TickDuration - slack)}
			before := dataplane.Nanotime()
			got := int64(f.expires(&tc.flow))
			after := dataplane.Nanotime()
			switch {
			case tc.want < 0 && got != 0:
				t.Errorf("expires %d, want 0", got)
			case tc.want >= 0 && (got < before+int64(tc.want) || got > after+int64(tc.want)):
				t.Errorf("expires %v after now, want %v", time.Duration(got-before), tc.want)
			}
		})
	}
}
