package daemon

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/control/config"
)

// churnConfig has vips VIPs of backends backends each; gen[i] names the
// generation of VIP i's backends: a new generation is a new set of
// backend addresses.
func churnConfig(gen []int, backends int) string {
	var b strings.Builder
	b.WriteString(generatedHead)
	for i, g := range gen {
		fmt.Fprintf(&b, "[[vip]]\nname = \"v%d\"\naddress = \"198.18.2.%d\"\nport = 80\ntable_size = 251\n[vip.healthcheck]\ntype = \"none\"\n", i, 1+i)
		for j := 0; j < backends; j++ {
			// 198.19.0.0/16 has room for 65,000 generations of
			// backends; the port tells the VIPs apart.
			n := g*backends + j
			fmt.Fprintf(&b, "[[vip.backend]]\naddress = \"198.19.%d.%d\"\nport = %d\n", n/250%256, 1+n%250, 10000+i)
		}
	}
	return b.String()
}

// TestReloadsFlat reloads 1,000 times, each reload replacing one VIP's
// backends with new ones (new addresses, so new identities), one minute
// apart on the registry's clock: the arrays indexed by backend reference
// stay within the backends of the last conntrack timeout, and the heap
// stops growing, whatever the number of reloads.
func TestReloadsFlat(t *testing.T) {
	tests := []struct {
		name           string
		vips, backends int
		interval       time.Duration // between reloads
	}{
		{"churn a VIP per minute", 10, 10, time.Minute},
		{"churn a VIP per 10 s", 10, 10, 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "vipd.toml")
			gen := make([]int, tt.vips)
			for i := range gen {
				gen[i] = i
			}
			next := tt.vips
			write := func() {
				if err := os.WriteFile(path, []byte(churnConfig(gen, tt.backends)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write()
			cfg, _, err := config.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			d := New(cfg, Options{ConfigPath: path, Platform: newMemPlatform(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
			clock := time.Unix(1e9, 0)
			d.reg.SetClock(func() time.Time { return clock })
			goLiveBare(t, d)
			const reloads = 1000
			hold := d.reg.Hold()
			// Live backends, and those released within the hold.
			bound := tt.vips*tt.backends + tt.backends*(int(hold/tt.interval)+1)
			var slots, refs [2]int
			var heap [2]uint64
			for n := 1; n <= reloads; n++ {
				gen[n%tt.vips] = next
				next++
				write()
				if err := d.Reload(); err != nil {
					t.Fatalf("reload %d: %v", n, err)
				}
				clock = clock.Add(tt.interval)
				if n == reloads/2 || n == reloads {
					var m runtime.MemStats
					runtime.GC()
					runtime.ReadMemStats(&m)
					k := n * 2 / reloads
					slots[k-1], refs[k-1], heap[k-1] = d.snaps.Load().RefSlots(), d.reg.Refs(), m.HeapInuse
				}
			}
			t.Logf("refs handed out %d at %d reloads, %d at %d (bound %d); ref slots %d, %d; heap in use %.1f MiB, %.1f MiB",
				refs[0], reloads/2, refs[1], reloads, bound, slots[0], slots[1], float64(heap[0])/(1<<20), float64(heap[1])/(1<<20))
			// Past the first hold, every new backend takes a released
			// ref: none is handed out any more.
			if refs[1] != refs[0] || refs[1] > bound {
				t.Errorf("refs handed out: %d at %d reloads, %d at %d: want flat, at most %d", refs[0], reloads/2, refs[1], reloads, bound)
			}
			if slots[0] > refs[0]+1 || slots[1] > refs[1]+1 {
				t.Errorf("ref slots %d, %d beyond the refs handed out", slots[0], slots[1])
			}
			// The heap may wander with the garbage collector's timing, not
			// grow with reloads: a quarter, and a MiB, of slack.
			if heap[1] > heap[0]+heap[0]/4+1<<20 {
				t.Errorf("heap in use grew from %d to %d bytes over %d reloads", heap[0], heap[1], reloads/2)
			}
		})
	}
}
