package daemon

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/control/fleet"
	"github.com/vipd/vipd/testing/testkit"
)

// chanStore is a fleet whose keys the test sets and whose watch delivers
// the batches the test sends.
type chanStore struct {
	mu   sync.Mutex
	rev  int64
	kvs  []fleet.KV
	down bool // Get fails
	// batches feeds every watch, one after another.
	batches chan fleet.Batch
}

func (s *chanStore) Get(context.Context) (int64, []fleet.KV, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return 0, nil, errors.New("etcdserver: no leader")
	}
	return s.rev, slices.Clone(s.kvs), nil
}

// set makes the keys as of rev what Get reads.
func (s *chanStore) set(rev int64, down bool, kvs ...fleet.KV) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rev, s.down, s.kvs = rev, down, kvs
}

func (s *chanStore) Watch(ctx context.Context, rev int64) <-chan fleet.Batch {
	out := make(chan fleet.Batch)
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case b := <-s.batches:
				select {
				case out <- b:
				case <-ctx.Done():
					return
				}
				if b.Err != nil {
					return
				}
			}
		}
	}()
	return out
}

// fleetParts splits a test configuration into the box's file (with
// [fleet], its cache next to the admin socket) and the shared document.
func fleetParts(src string) (local, shared string) {
	i := strings.Index(src, "[[vip]]")
	local = src[:i] + "[fleet]\nendpoints = [\"http://127.0.0.1:1\"]\nprefix = \"/t/\"\nbox = \"box1\"\ncache_file = \"@SOCKET@.fleet-cache\"\n"
	return local, src[i:]
}

// TestFleetApply: a box with [fleet] applies each revision whole (an
// override, a new backend), refuses one that changes the seed and keeps
// the last good one, keeps its VIPs over a reload of its file, writes
// each applied revision to its cache and its status to its box key, and
// keeps forwarding, stale, when etcd is away.
func TestFleetApply(t *testing.T) {
	localSrc, shared := fleetParts(testConfig)
	store := &chanStore{rev: 5, kvs: []fleet.KV{{Key: "config", Value: []byte(shared)}}, batches: make(chan fleet.Batch)}
	var boxMu sync.Mutex
	var boxes []fleet.BoxStatus
	td := newTestDaemonWith(t, localSrc, nil, func(local *config.Config, o *Options) *config.Config {
		k := &fleet.Keys{Revision: 5, Config: []byte(shared)}
		c, err := fleet.Compose(local, k)
		if err != nil {
			t.Fatal(err)
		}
		o.Fleet = &FleetSource{Store: store, Local: local, Start: k, Composed: c,
			BoxKey: func(ctx context.Context, updates <-chan fleet.BoxStatus) {
				for {
					select {
					case <-ctx.Done():
						return
					case st := <-updates:
						boxMu.Lock()
						boxes = append(boxes, st)
						boxMu.Unlock()
					}
				}
			}}
		return c.Config
	})
	lb := td.logTo()
	td.run()
	td.waitRunning()
	lastBox := func() fleet.BoxStatus {
		boxMu.Lock()
		defer boxMu.Unlock()
		if len(boxes) == 0 {
			return fleet.BoxStatus{}
		}
		return boxes[len(boxes)-1]
	}
	fleetState := func() *api.FleetState {
		st, err := td.d.State(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return st.Fleet
	}
	cacheRev := func() int64 {
		s, err := fleet.Load(td.socket+".fleet-cache", "/t/")
		if err != nil {
			return 0
		}
		return s.Revision
	}
	testkit.Eventually(t, testkit.Patience, "the start's revision in the cache and the box key", func() bool {
		return cacheRev() == 5 && lastBox().Revision == 5
	})
	if fs := fleetState(); fs == nil || fs.Revision != 5 || !fs.Connected || fs.Stale || fs.FromCache {
		t.Fatalf("fleet state at start: %+v", fs)
	}
	if b := lastBox(); b.Box != "box1" || b.Seed != config.DefaultFlowHashSeed || len(b.Tables) != 2 || b.Role != "active" || b.Digest == "" {
		t.Errorf("box key: %+v", b)
	}

	// An override: applied whole, shown with who and why, in the cache.
	store.batches <- fleet.Batch{Revision: 6, Events: []fleet.Event{{Key: "overrides/web/198.18.1.11:8080", Value: []byte(`{"drain":true,"by":"ops","why":"kernel"}`), Revision: 6}}}
	testkit.Eventually(t, testkit.Patience, "the fleet's drain in force", func() bool {
		b := td.backendState("web", "198.18.1.11")
		return b.Config == "draining" && b.FleetOverride != nil && b.FleetOverride.What == "drain" && b.FleetOverride.Why == "kernel"
	})
	for port := uint16(40000); port < 40040; port++ {
		if got := td.send(syn(t, "198.18.0.100", port, "S")); got.String() == "198.18.1.11" {
			t.Fatalf("a new flow went to the drained backend")
		}
	}
	testkit.Eventually(t, testkit.Patience, "revision 6 in the cache and the box key", func() bool {
		return cacheRev() == 6 && lastBox().Revision == 6
	})

	// A seed change needs a restart: refused, the box keeps revision 6.
	seeded := "flow_hash_seed = 99\n" + shared
	store.batches <- fleet.Batch{Revision: 7, Events: []fleet.Event{{Key: "config", Value: []byte(seeded), Revision: 7}}}
	testkit.Eventually(t, testkit.Patience, "revision 7 refused", func() bool {
		fs := fleetState()
		return fs.Refused == 7 && strings.Contains(fs.RefusedWhy, "flow_hash_seed") && fs.ApplyErrors == 1
	})
	if fs := fleetState(); fs.Revision != 6 {
		t.Errorf("revision %d after a refusal, want 6", fs.Revision)
	}
	testkit.Eventually(t, testkit.Patience, "the refusal in the box key", func() bool {
		b := lastBox()
		return b.Refused == 7 && strings.Contains(b.LastError, "needs a restart")
	})
	if len(lb.lines("fleet revision refused", "revision=7", "kept=6")) == 0 {
		t.Errorf("no refusal logged:\n%s", lb.String())
	}
	if m := td.d.Metrics(); m.Fleet == nil || m.Fleet.ApplyErrors != 1 || m.Fleet.Revision != 6 {
		t.Errorf("metrics: %+v", m.Fleet)
	}

	// A new backend: applied, the override still in force.
	added := strings.Replace(shared, "[[vip]]\nname = \"dsr\"", "[[vip.backend]]\naddress = \"198.18.1.13\"\nport = 8080\n[[vip]]\nname = \"dsr\"", 1)
	if added == shared {
		t.Fatal("the test's document has no VIP dsr after web")
	}
	store.batches <- fleet.Batch{Revision: 8, Events: []fleet.Event{{Key: "config", Value: []byte(added), Revision: 8}}}
	testkit.Eventually(t, testkit.Patience, "revision 8 applied", func() bool {
		fs := fleetState()
		return fs.Revision == 8 && fs.Refused == 0
	})
	_ = td.backendState("web", "198.18.1.13")
	if b := td.backendState("web", "198.18.1.11"); b.Config != "draining" {
		t.Errorf("the fleet's drain lost with revision 8: %+v", b)
	}

	// A reload of the file joins it with the fleet's revision 8.
	if err := td.d.Reload(); err != nil {
		t.Fatal(err)
	}
	_ = td.backendState("web", "198.18.1.13")
	if b := td.backendState("web", "198.18.1.11"); b.Config != "draining" {
		t.Errorf("the fleet's drain lost with a reload: %+v", b)
	}

	// etcd away: stale, and traffic goes on.
	store.set(8, true)
	store.batches <- fleet.Batch{Err: errors.New("etcdserver: no leader")}
	testkit.Eventually(t, testkit.Patience, "stale", func() bool {
		fs := fleetState()
		return fs.Stale && !fs.Connected && strings.Contains(fs.EtcdError, "no leader")
	})
	if got := td.send(syn(t, "198.18.0.100", 41000, "S")); got.String() != "198.18.1.12" && got.String() != "198.18.1.13" {
		t.Errorf("a new flow while etcd is away went to %s", got)
	}
	if b := td.backendState("web", "198.18.1.11"); b.Config != "draining" {
		t.Errorf("the fleet's drain lost while etcd is away: %+v", b)
	}

	// etcd back at a later revision of other keys only: current again,
	// nothing compiled.
	gen := td.d.Metrics().Generation
	store.set(9, false, fleet.KV{Key: "config", Value: []byte(added)},
		fleet.KV{Key: "overrides/web/198.18.1.11:8080", Value: []byte(`{"drain":true,"by":"ops","why":"kernel"}`)},
		fleet.KV{Key: "boxes/box2", Value: []byte(`{}`)})
	testkit.Eventually(t, testkit.Patience, "current again", func() bool {
		fs := fleetState()
		return !fs.Stale && fs.Connected && fs.Revision == 9 && fs.EtcdError == ""
	})
	if g := td.d.Metrics().Generation; g != gen {
		t.Errorf("the same keys at a new revision published a snapshot (generation %d → %d)", gen, g)
	}
	testkit.Eventually(t, testkit.Patience, "revision 9 in the cache", func() bool { return cacheRev() == 9 })
}
