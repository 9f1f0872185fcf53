package daemon

import (
	"bytes"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/dataplane"
	"github.com/vipd/vipd/dataplane/afpacket"
	"github.com/vipd/vipd/dataplane/xdpprog"
	"github.com/vipd/vipd/internal/linkwatch"
)

// TestFrameSize checks the frame size the platform opens its driver with
// (configured, or by the MTUs) and that every interface whose frames do
// not fit is warned of, once, at start and when its MTU changes.
func TestFrameSize(t *testing.T) {
	xdp := func(p *LinuxPlatform, size int) int {
		return p.frameSize(&config.Dataplane{IO: config.IOAFXDP, FrameSize: size})
	}
	pkt := func(p *LinuxPlatform, size int) int {
		return p.frameSize(&config.Dataplane{IO: config.IOAFPacket, FrameSize: size})
	}
	tests := []struct {
		name     string
		open     func(*LinuxPlatform, int) int
		size     int    // configured
		in, eg   int    // MTUs; eg 0: one-armed
		want     int    // frame size opened with
		warnedOf string // interfaces warned of, by name, space-separated
	}{
		{"afxdp auto 1500", xdp, 0, 1500, 0, 2048, ""},
		{"afxdp auto at the limit", xdp, 0, 1774, 1500, 2048, ""},
		{"afxdp auto over", xdp, 0, 1500, 1775, 4096, ""},
		{"afxdp auto jumbo", xdp, 0, 9000, 0, 4096, "in"},
		{"afxdp 2048 configured, over", xdp, 2048, 1500, 1800, 2048, "eg"},
		{"afxdp 4096 configured", xdp, 4096, 1500, 0, 4096, ""},
		{"afpacket auto at the limit", pkt, 0, 1836, 0, 2048, ""},
		{"afpacket auto over", pkt, 0, 1837, 0, 4096, ""},
		{"afpacket 2048 configured, over", pkt, 2048, 1837, 1837, 2048, "in eg"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			p := &LinuxPlatform{log: slog.New(slog.NewTextHandler(&logs, nil))}
			p.links[0] = linkwatch.Link{Name: "in", Index: 1, MTU: tt.in}
			p.links[1] = p.links[0]
			if tt.eg != 0 {
				p.links[1] = linkwatch.Link{Name: "eg", Index: 2, MTU: tt.eg}
			}
			if got := tt.open(p, tt.size); got != tt.want {
				t.Errorf("frame size %d, want %d", got, tt.want)
			}
			if got := warned(logs.String()); got != tt.warnedOf {
				t.Errorf("warned of %q, want %q\n%s", got, tt.warnedOf, logs.String())
			}
			// An MTU change: over the frame, then back.
			logs.Reset()
			p.checkMTU(linkwatch.Link{Name: "in", Index: 1, MTU: p.frames.MaxMTU() + 1})
			p.checkMTU(linkwatch.Link{Name: "in", Index: 1, MTU: p.frames.MaxMTU()})
			if got := warned(logs.String()); got != "in" {
				t.Errorf("after MTU changes to one over the limit and back: warned of %q, want \"in\"", got)
			}
		})
	}
}

// warned returns the interfaces the log warns of, space-separated.
func warned(log string) string {
	var names []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, "MTU over") {
			for _, f := range strings.Fields(l) {
				if n, ok := strings.CutPrefix(f, "interface="); ok {
					names = append(names, n)
				}
			}
		}
	}
	return strings.Join(names, " ")
}

// TestCheckReload: with AF_PACKET a reload runs the host check start
// runs, for the new VIPs: the first IPv6 VIP with IPv6 forwarding on is
// refused, as it would be at start; with AF_XDP there is nothing to check.
func TestCheckReload(t *testing.T) {
	dir := t.TempDir()
	for path, v := range map[string]string{"sys/net/ipv4/ip_forward": "0", "sys/net/ipv6/conf/all/forwarding": "1"} {
		p := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	withVIPs := func(addrs ...string) *config.Config {
		c := &config.Config{}
		for _, a := range addrs {
			c.VIPs = append(c.VIPs, config.VIP{Address: netip.MustParseAddr(a)})
		}
		return c
	}
	for _, tc := range []struct {
		io      config.IO
		vips    []string
		refused bool
	}{
		{config.IOAFPacket, []string{"198.18.0.100"}, false},
		{config.IOAFPacket, []string{"198.18.0.100", "2001:2::100"}, true},
		{config.IOAFXDP, []string{"198.18.0.100", "2001:2::100"}, false},
	} {
		p := &LinuxPlatform{proc: dir, cfg: &config.Config{Dataplane: config.Dataplane{IO: tc.io}}}
		err := p.CheckReload(withVIPs(tc.vips...))
		if refused := errors.Is(err, afpacket.ErrHost); refused != tc.refused || (err != nil && !refused) {
			t.Errorf("%s, VIPs %v: %v; want refused %v", tc.io, tc.vips, err, tc.refused)
		}
	}
}

// TestSteeringLimitsAgree: the configuration refuses exactly what the
// steering program's maps cannot hold.
func TestSteeringLimitsAgree(t *testing.T) {
	if config.MaxSteeredVIPAddrs != xdpprog.MaxVIPs || config.MaxNATReplySources != xdpprog.MaxReplies {
		t.Errorf("config limits %d VIP addresses, %d NAT reply sources; the steering maps hold %d and %d",
			config.MaxSteeredVIPAddrs, config.MaxNATReplySources, xdpprog.MaxVIPs, xdpprog.MaxReplies)
	}
	if config.MaxFastPathFlows != xdpprog.MaxFastFlows || dataplane.FastSlots != xdpprog.MaxFastRefs {
		t.Errorf("config limits the fast path to %d flows, workers count in %d slots; the program holds %d flows and counts %d slots",
			config.MaxFastPathFlows, dataplane.FastSlots, xdpprog.MaxFastFlows, xdpprog.MaxFastRefs)
	}
}
