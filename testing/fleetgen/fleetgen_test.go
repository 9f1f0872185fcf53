package fleetgen

import (
	"testing"

	"github.com/vipd/vipd/control/config"
)

// TestShared: the document is one a box accepts, with every VIP and
// backend asked for.
func TestShared(t *testing.T) {
	cfg, _, err := config.ParseShared("shared.toml", Shared(20, 30, 3), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.VIPs) != 20 || cfg.Dataplane.FlowHashSeed != 1234567 {
		t.Fatalf("%d VIPs, seed %d", len(cfg.VIPs), cfg.Dataplane.FlowHashSeed)
	}
	for _, v := range cfg.VIPs {
		if len(v.Backends) != 30 || v.Backends[29].Weight != 3 {
			t.Fatalf("VIP %s: %d backends", v.Name, len(v.Backends))
		}
	}
}
