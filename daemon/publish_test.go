package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/vipd/vipd/control"
	"github.com/vipd/vipd/dataplane"
)

// generation returns the number of snapshots published.
func (d *Daemon) generation() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.gen
}

// TestPublisherCoalesces: a lone health report is published within a few
// milliseconds; a burst of reports is published in at most one snapshot
// per publishGap, and the last snapshot has every report in it.
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
			waitUntil(t, "the reports published", func() bool {
				d.mu.Lock()
				defer d.mu.Unlock()
				return !d.pending && d.gen > gen0
			})
			elapsed := time.Since(start)
			publishes := d.generation() - gen0
			if tt.events == 1 && elapsed > 100*time.Millisecond {
				t.Errorf("a lone report took %v to be published", elapsed)
			}
			if most := 2 + uint64(elapsed/publishGap); publishes > most {
				t.Errorf("%d reports in %v made %d snapshots, want at most %d (one per %v)", tt.events, elapsed, publishes, most, publishGap)
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
