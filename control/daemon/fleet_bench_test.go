package daemon

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/control/fleet"
	"github.com/vipd/vipd/testing/etcdtest"
	"github.com/vipd/vipd/testing/fleetgen"
)

// The fleet's numbers (docs/fleet.md, Numbers): what a revision costs a
// box to apply at scale, how long a push takes to reach three boxes, what
// following a fleet costs in memory and in CPU when nothing changes.

// smokeVIPs is n, or a tenth of it with -short: make test runs every
// benchmark once, to see that it runs, not for its figures.
func smokeVIPs(n int) int {
	if testing.Short() {
		return n / 10
	}
	return n
}

// midDrain is the fleet override that drains the 50th backend of the
// middle VIP of a fleetgen fleet of n VIPs.
func midDrain(n int) map[string][]byte {
	return map[string][]byte{fmt.Sprintf("v%d/198.19.0.50:%d", n/2, 10000+n/2): []byte(`{"drain":true}`)}
}

// fleetLocal is a box's file for the benchmarks: generatedHead with its
// state and cache files under dir, and [fleet] on endpoints.
func fleetLocal(tb testing.TB, dir string, endpoints []string) *config.Config {
	tb.Helper()
	src := strings.Replace(generatedHead, "[dataplane]\n", fmt.Sprintf("[dataplane]\nstate_file = %q\n", filepath.Join(dir, "state.json")), 1)
	src += fmt.Sprintf("[fleet]\nendpoints = [\"%s\"]\nprefix = \"/bench/\"\ncache_file = %q\n", strings.Join(endpoints, `", "`), filepath.Join(dir, "cache"))
	cfg, _, err := config.Parse("bench.toml", []byte(src))
	if err != nil {
		tb.Fatal(err)
	}
	return cfg
}

// newFleetPublishDaemon is newPublishDaemon for a box of a fleet that
// starts on doc at revision rev, reading store (nil: none).
func newFleetPublishDaemon(tb testing.TB, local *config.Config, doc []byte, rev int64, store fleet.Store) *Daemon {
	tb.Helper()
	k := &fleet.Keys{Revision: rev, Config: doc}
	c, err := fleet.Compose(local, k)
	if err != nil {
		tb.Fatal(err)
	}
	d := New(c.Config, Options{Platform: newMemPlatform(), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Fleet: &FleetSource{Store: store, Local: local, Start: k, Composed: c}})
	goLiveBare(tb, d)
	// Before the files' directory goes (cleanups run last first).
	tb.Cleanup(func() { d.syncFleetCache(stateWaitStop) })
	return d
}

// BenchmarkFleetApply is one revision of a fleet of 1,000 VIPs × 100
// backends applied on a box. "document": a push, the whole document
// (5.4 MB of TOML) decoded and checked with the box's file, compiled and
// published; each revision changes one backend's weight. "override": a
// fleet drain, undone and done again, the document unchanged. s/apply is
// the latency, cpu-s/apply the process's CPU time (the garbage
// collector's included); doc-bytes and stored-bytes the document's size
// and its size as stored in etcd.
func BenchmarkFleetApply(b *testing.B) {
	local := fleetLocal(b, b.TempDir(), []string{"http://127.0.0.1:1"})
	doc := fleetgen.Shared(smokeVIPs(1000), 100, 0)
	reweighted := bytes.Replace(doc, []byte("port = 10000\n"), []byte("port = 10000\nweight = 2\n"), 1)
	stored, err := fleet.EncodeConfig(doc)
	if err != nil {
		b.Fatal(err)
	}
	drain := midDrain(smokeVIPs(1000))
	for _, bc := range []struct {
		name string
		keys func(i int) *fleet.Keys
	}{
		{"document", func(i int) *fleet.Keys {
			return &fleet.Keys{Revision: int64(i + 2), Config: [2][]byte{reweighted, doc}[i%2]}
		}},
		{"override", func(i int) *fleet.Keys {
			k := &fleet.Keys{Revision: int64(i + 2), Config: doc}
			if i%2 == 0 {
				k.Overrides = drain
			}
			return k
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			d := newFleetPublishDaemon(b, local, doc, 1, nil)
			// The steady state: the first revision after the start parses
			// the document whatever it changes.
			if err := d.applyFleet(&fleet.Keys{Revision: 1 << 40, Config: doc}); err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			cpu0 := cpuTime(b)
			start := time.Now()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				k := bc.keys(i)
				k.Revision += 1 << 40
				if err := d.applyFleet(k); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			el, cpu := time.Since(start), cpuTime(b)-cpu0
			b.ReportMetric(el.Seconds()/float64(b.N), "s/apply")
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/apply")
			b.ReportMetric(float64(len(doc)), "doc-bytes")
			b.ReportMetric(float64(len(stored)), "stored-bytes")
		})
	}
}

// BenchmarkFleetMemory compares the heap of a box running 1,000 VIPs ×
// 100 backends from a file with the same box running them from a fleet,
// each after one drain (a reload of the file; a fleet drain, which keeps
// the document for the next revision): heap-MB for each and their
// ratio, goal at most 1.10.
func BenchmarkFleetMemory(b *testing.B) {
	doc := fleetgen.Shared(smokeVIPs(1000), 100, 0)
	local := fleetLocal(b, b.TempDir(), []string{"http://127.0.0.1:1"})
	head := strings.Replace(generatedHead, "[dataplane]\n", fmt.Sprintf("[dataplane]\nflow_hash_seed = 1234567\nstate_file = %q\n", filepath.Join(b.TempDir(), "state.json")), 1)
	vips := doc[bytes.Index(doc, []byte("[[vip]]")):]
	heap := func(make func() *Daemon) (float64, *Daemon) {
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		d := make()
		runtime.GC()
		runtime.ReadMemStats(&m1)
		return float64(m1.HeapAlloc-m0.HeapAlloc) / (1 << 20), d
	}
	for i := 0; i < b.N; i++ {
		file, d1 := heap(func() *Daemon {
			// The same change, by a reload of the file.
			d := newPublishDaemon(b, head+string(vips))
			port := fmt.Sprintf("port = %d\n", 10000+smokeVIPs(1000)/2)
			cfg, _, err := config.Parse("bench.toml", bytes.Replace([]byte(head+string(vips)), []byte(port), []byte(port+"state = \"draining\"\n"), 1))
			if err != nil {
				b.Fatal(err)
			}
			d.mu.Lock()
			_, _, err = d.applyLocked(cfg, "reload")
			d.mu.Unlock()
			if err != nil {
				b.Fatal(err)
			}
			return d
		})
		fromFleet, d2 := heap(func() *Daemon {
			d := newFleetPublishDaemon(b, local, bytes.Clone(doc), 1, nil)
			drain := midDrain(smokeVIPs(1000))
			if err := d.applyFleet(&fleet.Keys{Revision: 2, Config: bytes.Clone(doc), Overrides: drain}); err != nil {
				b.Fatal(err)
			}
			d.syncFleetCache(stateWaitStop)
			return d
		})
		b.ReportMetric(file, "file-heap-MB")
		b.ReportMetric(fromFleet, "fleet-heap-MB")
		b.ReportMetric(fromFleet/file, "fleet/file")
		runtime.KeepAlive(d1)
		runtime.KeepAlive(d2)
	}
}

// BenchmarkFleetPush is push → applied on three boxes, each following an
// embedded one-member etcd with the watcher vipd runs: a small fleet (10
// VIPs × 10 backends), each push changing one weight. p50-ms and p99-ms
// are over the b.N pushes (run it with -benchtime=100x), measured from
// the push's answer to the last of the three boxes publishing it (each
// polled every 100 µs).
func BenchmarkFleetPush(b *testing.B) {
	c := etcdtest.Start(b, 1)
	cli := c.Client(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	docs := [2][]byte{fleetgen.Shared(10, 10, 0)}
	docs[1] = bytes.Replace(docs[0], []byte("port = 10000\n"), []byte("port = 10000\nweight = 2\n"), 1)
	rev, err := fleet.Push(ctx, cli, "/bench/", docs[0], 0)
	if err != nil {
		b.Fatal(err)
	}
	var boxes []*Daemon
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for range 3 {
		d := newFleetPublishDaemon(b, fleetLocal(b, b.TempDir(), c.Endpoints()), docs[0], rev,
			&fleet.EtcdStore{Client: cli, Prefix: "/bench/"})
		boxes = append(boxes, d)
		wg.Go(func() { d.fleet.watcher.Run(ctx) })
	}
	lat := make([]time.Duration, 0, b.N)
	mod := rev
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rev, err := fleet.Push(ctx, cli, "/bench/", docs[(i+1)%2], mod)
		if err != nil {
			b.Fatal(err)
		}
		mod = rev
		pushed := time.Now()
		for _, d := range boxes {
			for d.fleet.applied.Load().revision < rev {
				if time.Since(pushed) > time.Minute {
					b.Fatalf("revision %d not applied in a minute: %+v", rev, d.fleet.watcher.State())
				}
				time.Sleep(100 * time.Microsecond)
			}
		}
		lat = append(lat, time.Since(pushed))
	}
	b.StopTimer()
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1e3 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

// BenchmarkFleetIdle is what following a quiet fleet costs a box: the
// watch (its progress requests every 2 s), the box key's lease and the
// status compared every second, for 10 s a run, against Debian's etcd
// (a process of its own, so that the figure is the client's alone).
// cpu-ms/s is the process's CPU time per second of wall time.
func BenchmarkFleetIdle(b *testing.B) {
	path, err := exec.LookPath("etcd")
	if err != nil {
		b.Skip("no etcd binary in PATH: Debian's etcd-server installs /usr/bin/etcd (make test-deps)")
	}
	c := etcdtest.StartBinary(b, path)
	cli := c.Client(b)
	ctx, cancel := context.WithCancel(context.Background())
	doc := fleetgen.Shared(10, 10, 0)
	rev, err := fleet.Push(ctx, cli, "/bench/", doc, 0)
	if err != nil {
		b.Fatal(err)
	}
	local := fleetLocal(b, b.TempDir(), c.Endpoints())
	d := newFleetPublishDaemon(b, local, doc, rev, &fleet.EtcdStore{Client: cli, Prefix: "/bench/"})
	bk := &fleet.BoxKey{Client: cli, Prefix: "/bench/", Box: "bench"}
	d.fleet.boxKey = bk.Run
	var wg sync.WaitGroup
	d.startFleet(ctx, &wg)
	defer wg.Wait()
	defer cancel()
	window, settle := 10*time.Second, 2*time.Second
	if testing.Short() { // make test's one run of every benchmark
		window, settle = time.Second, 500*time.Millisecond
	}
	time.Sleep(settle) // the first read, the lease, the first status
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cpu0, start := cpuTime(b), time.Now()
		time.Sleep(window)
		b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/1e3/time.Since(start).Seconds(), "cpu-ms/s")
	}
}
