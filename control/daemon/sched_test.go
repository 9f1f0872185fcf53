package daemon

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/dataplane"
)

// flowCache returns the daemon's flow cache (nil before Run goes live).
func (d *Daemon) flowCache() *flowCache {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.flows
}

// TestSchedulerNamesAgree: the configuration's schedulers are the
// dataplane's, and they agree on which are consistent across boxes.
func TestSchedulerNamesAgree(t *testing.T) {
	if !slices.Equal(config.Schedulers, dataplane.SchedulerNames()) {
		t.Fatalf("config %v, dataplane %v", config.Schedulers, dataplane.SchedulerNames())
	}
	for _, name := range config.Schedulers {
		s, ok := dataplane.ParseScheduler(name)
		if !ok || s.Consistent() != config.ConsistentScheduler(name) {
			t.Errorf("%s: parsed %v, consistent %v vs %v", name, ok, s.Consistent(), config.ConsistentScheduler(name))
		}
	}
}

// TestLoadsPublished: with a load-aware scheduler, the workers' active
// flows are summed onto the board they read, and lc spreads new flows by
// them; with Maglev only, nothing is walked.
func TestLoadsPublished(t *testing.T) {
	src := strings.Replace(testConfig, "port = 80\n[vip.healthcheck]", "port = 80\nscheduler = \"lc\"\n[vip.healthcheck]", 1)
	td := start(t, src)
	got := map[netip.Addr]int{}
	for p := uint16(1000); p < 1010; p++ {
		got[td.send(syn(t, "198.18.0.100", p, "S"))]++
	}
	if len(got) != 2 || got[netip.MustParseAddr("198.18.1.11")] != 5 {
		t.Errorf("lc over two idle backends of weight 1: %v, want 5 each", got)
	}
	td.d.loadRound(context.Background())
	l := td.d.loads.Load()
	if l == nil {
		t.Fatal("no load published")
	}
	total := 0
	for _, n := range l.Active {
		total += int(n)
	}
	if total != 10 {
		t.Errorf("published %d active flows, want 10: %v", total, l.Active)
	}
	// A round within flowsTTL reuses the walk: it publishes nothing, so
	// that the workers keep counting the flows they pinned since.
	walks := td.d.flowCache().walked()
	td.d.loadRound(context.Background())
	if td.d.flowCache().walked() == walks && td.d.loads.Load() != l {
		t.Errorf("a round that reused the walk published a new load")
	}

	plain := start(t, testConfig)
	plain.d.loadRound(context.Background())
	if plain.d.loads.Load() != nil || plain.d.flowCache().walked() != 0 {
		t.Errorf("Maglev only: a load was summed (%d walks)", plain.d.flowCache().walked())
	}
}
