package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/vipd/vipd/control"
	"github.com/vipd/vipd/dataplane"
	"github.com/vipd/vipd/testing/testkit"
)

// generation returns the number of snapshots published.
func (d *Daemon) generation() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.gen
}

// TestPublisherCoalesces: a lone health report is published at once, not
// after a gap (the publisher's gap is made 10 min, and the report must be
// out within waitUntil's 30 s: a clock bound of milliseconds would fail
// on a loaded machine under -race, where the publish alone takes tens); a
// burst of reports is published in at most one snapshot per publishGap,
// and the last snapshot has every report in it.
func TestPublisherCoalesces(t *testing.T) {
	tests := []struct {
		name   string
		events int
	}{
		{"lone event", 1},
		{"burst", 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newPublishDaemon(t, bigConfig(10, 10))
			if tt.events == 1 {
				d.gap = 10 * time.Minute
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				d.runPublisher(ctx)
			}()
			t.Cleanup(func() {
				cancel()
				<-done
			})
			d.mu.Lock()
			targets := d.healthTargets(d.cfg)
			d.mu.Unlock()
			gen0 := d.generation()
			start := time.Now()
			for i := 0; i < tt.events; i++ {
				d.setHealth(targets[i].Ref, control.Status{Down: true}, false, true)
			}
			// Published once nothing waits any more.
			testkit.Eventually(t, testkit.Patience, "the reports published", func() bool {
				d.mu.Lock()
				defer d.mu.Unlock()
				return !d.pending && d.gen > gen0
			})

			elapsed := time.Since(start)
			publishes := d.generation() - gen0
			if tt.events == 1 && elapsed > d.gap/2 {
				t.Errorf("a lone report took %v to be published: it waited for the %v gap", elapsed, d.gap)
			}
			if most := 2 + uint64(elapsed/d.gap); publishes > most {
				t.Errorf("%d reports in %v made %d snapshots, want at most %d (one per %v)", tt.events, elapsed, publishes, most, d.gap)
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			down := 0
			for _, v := range d.spec.VIPs {
				for _, b := range v.Backends {
					if b.State == dataplane.BackendDown {
						down++
					}
				}
			}
			if down != tt.events {
				t.Errorf("%d backends down in the last snapshot, want %d", down, tt.events)
			}
			t.Logf("%d reports: %d snapshots in %v", tt.events, publishes, elapsed)
		})
	}
}
