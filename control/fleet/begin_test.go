package fleet

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/control/config"
)

// TestBegin: a box starts from etcd when it answers with a revision that
// applies, else from its cache; neither is an error naming both.
func TestBegin(t *testing.T) {
	good := []KV{{"config", []byte(composeShared)}, {"overrides/web/198.18.1.11:8080", []byte(`{"drain":true}`)}}
	bad := []KV{{"config", []byte(strings.Replace(composeShared, "port = 80\n", "port = 80000\n", 1))}}
	down := fakeRead{err: errors.New("context deadline exceeded")}
	cases := []struct {
		name      string
		read      fakeRead
		cache     string // "good", "corrupt", "" (none)
		fromCache bool
		rev       int64
		err       []string // what the error says; nil: none
		cacheProb bool
	}{
		{name: "etcd", read: fakeRead{rev: 20, kvs: good}, cache: "good", rev: 20},
		{name: "etcd, corrupt cache", read: fakeRead{rev: 20, kvs: good}, cache: "corrupt", rev: 20, cacheProb: true},
		{name: "etcd away, cache", read: down, cache: "good", fromCache: true, rev: 12},
		{name: "etcd away, no cache", read: down, err: []string{"did not answer", "no fleet cache"}},
		{name: "etcd away, corrupt cache", read: down, cache: "corrupt", err: []string{"did not answer", "corrupt fleet cache"}},
		{name: "revision does not apply, cache", read: fakeRead{rev: 21, kvs: bad}, cache: "good", fromCache: true, rev: 12},
		{name: "no config key, no cache", read: fakeRead{rev: 3}, err: []string{"revision 3 does not apply", "no config key", "no fleet cache"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			src := composeLocal + "cache_file = \"" + filepath.Join(dir, "cache") + "\"\n"
			local, _, err := config.Parse("vipd.toml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			saved := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
			switch tc.cache {
			case "good":
				if err := Save(local.Fleet.CacheFile, &Snapshot{Prefix: local.Fleet.Prefix, Revision: 12, Config: composeShared, Saved: saved}); err != nil {
					t.Fatal(err)
				}
			case "corrupt":
				if err := os.WriteFile(local.Fleet.CacheFile, []byte("vipd fleet cache 1\nsha256 00\n{}"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			b, err := Begin(context.Background(), &fakeStore{reads: []fakeRead{tc.read}}, local, time.Second)
			if tc.err != nil {
				if err == nil {
					t.Fatalf("started (revision %d), want an error", b.Keys.Revision)
				}
				for _, w := range tc.err {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b.FromCache != tc.fromCache || b.Keys.Revision != tc.rev || (b.CacheProblem != nil) != tc.cacheProb {
				t.Errorf("from cache %v, revision %d, cache problem %v", b.FromCache, b.Keys.Revision, b.CacheProblem)
			}
			if tc.fromCache && (!b.Saved.Equal(saved) || b.Etcd == nil) {
				t.Errorf("from the cache: saved %v, etcd error %v", b.Saved, b.Etcd)
			}
			if len(b.Composed.Config.VIPs) != 1 {
				t.Errorf("%d VIPs composed", len(b.Composed.Config.VIPs))
			}
		})
	}
}
