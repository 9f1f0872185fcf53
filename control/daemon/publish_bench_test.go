package daemon

import (
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vipd/vipd/control"
	"github.com/vipd/vipd/control/config"
)

// bigConfig is a configuration of vips NAT VIPs with backends backends
// each, every backend a distinct (address, port), health-checked by TCP.
// Addresses are from 198.18.0.0/15: VIPs in 198.18.0.0/16, backends in
// 198.19.0.0/16 (at most 250 addresses, the port tells VIPs apart).
func bigConfig(vips, backends int) string {
	var b strings.Builder
	b.WriteString(generatedHead)
	for i := 0; i < vips; i++ {
		fmt.Fprintf(&b, "[[vip]]\nname = \"v%d\"\naddress = \"198.18.%d.%d\"\nport = 80\n", i, 2+i/250, 1+i%250)
		b.WriteString("[vip.healthcheck]\ntype = \"tcp\"\n")
		for j := 0; j < backends; j++ {
			fmt.Fprintf(&b, "[[vip.backend]]\naddress = \"198.19.%d.%d\"\nport = %d\n", j/250, 1+j%250, 10000+i)
		}
	}
	return b.String()
}

// newPublishDaemon returns a daemon on src that can publish (as if Run had
// gone live) without workers, health checks or a publisher goroutine: the
// benchmarks and tests drive it event by event.
func newPublishDaemon(tb testing.TB, src string) *Daemon {
	tb.Helper()
	cfg, _, err := config.Parse("bench.toml", []byte(src))
	if err != nil {
		tb.Fatal(err)
	}
	d := New(cfg, Options{Platform: newMemPlatform(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	goLiveBare(tb, d)
	d.mu.Lock()
	for _, t := range d.healthTargets(d.cfg) {
		d.targets[t.Ref] = true // as if the checks ran
	}
	d.mu.Unlock()
	return d
}

// goLiveBare publishes d's first snapshot and makes it live, as Run
// would, without workers, checks or a publisher.
func goLiveBare(tb testing.TB, d *Daemon) {
	tb.Helper()
	d.mu.Lock()
	d.setPhaseLocked(phaseStarting)
	err := d.publishLocked("start")
	d.setPhaseLocked(phaseLive)
	d.mu.Unlock()
	if err != nil {
		tb.Fatal(err)
	}
}

// cpuTime returns the CPU time, user and system, the process has used.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPublishFlap measures what a health event costs a large
// configuration, where rebuilding every VIP's tables on each event
// would show: 1,000 VIPs × 100 backends, one backend flapping down and
// up. Each iteration is one health event, taken from the report to the
// published snapshot. ms/publish is the latency of that; allocs/event
// and MB/event what it allocates.
func BenchmarkPublishFlap(b *testing.B) {
	for _, sz := range []struct{ vips, backends int }{{10, 100}, {1000, 100}} {
		b.Run(fmt.Sprintf("vips=%d/backends=%d", sz.vips, sz.backends), func(b *testing.B) {
			d := newPublishDaemon(b, bigConfig(sz.vips, sz.backends))
			d.mu.Lock()
			v := &d.cfg.VIPs[sz.vips/2]
			ref := d.reg.Ref(control.BackendKey(v, &v.Backends[sz.backends/2]))
			d.mu.Unlock()
			runtime.GC()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			cpu0 := cpuTime(b)
			start := time.Now()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				benchHealthEvent(d, ref, control.Status{Down: i%2 == 0})
			}
			b.StopTimer()
			el := time.Since(start)
			cpu := cpuTime(b) - cpu0
			runtime.ReadMemStats(&m1)
			b.ReportMetric(float64(el.Microseconds())/1e3/float64(b.N), "ms/publish")
			// The process's CPU time (the garbage collector's included)
			// does not grow when other work on the machine delays this.
			b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(b.N), "cpu-ms/event")
			b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(b.N), "allocs/event")
			b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/float64(b.N)/(1<<20), "MB/event")
		})
	}
}

// BenchmarkPublishFull is a publication that recompiles everything, as a
// change on the host (a next hop resolved, a link's address) makes: 1,000
// VIPs × 100 backends, nothing changed. It keeps every Maglev table.
func BenchmarkPublishFull(b *testing.B) {
	d := newPublishDaemon(b, bigConfig(1000, 100))
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	cpu0 := cpuTime(b)
	start := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := d.publish("bench"); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	el, cpu := time.Since(start), cpuTime(b)-cpu0
	runtime.ReadMemStats(&m1)
	b.ReportMetric(float64(el.Microseconds())/1e3/float64(b.N), "ms/publish")
	b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(b.N), "cpu-ms/event")
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(b.N), "allocs/event")
	b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/float64(b.N)/(1<<20), "MB/event")
}
