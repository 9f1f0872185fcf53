package fleet

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func testSnapshot() *Snapshot {
	return &Snapshot{
		Prefix:    "/vipd/fleets/edge1/",
		Revision:  42,
		Config:    "flow_hash_seed = 7\n\n[[vip]]\nname = \"web\"\n",
		Overrides: map[string]string{"web/198.18.1.11:8080": `{"drain":true,"by":"ops","why":"kernel upgrade"}`},
		Saved:     time.Date(2026, 12, 6, 6, 0, 0, 0, time.UTC),
	}
}

func TestCacheRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet-cache")
	want := testSnapshot()
	if err := Save(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path, want.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("loaded %+v, want %+v", got, want)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v; want 0600", fi.Mode(), err)
	}
}

// TestCacheRefused: every way a cache file can be wrong is an error that
// says so, naming the file; none yields a snapshot.
func TestCacheRefused(t *testing.T) {
	good, err := testSnapshot().Encode()
	if err != nil {
		t.Fatal(err)
	}
	edited := bytes.Replace(good, []byte("flow_hash_seed = 7"), []byte("flow_hash_seed = 8"), 1)
	noRev := testSnapshot()
	noRev.Revision = 0
	zero, _ := noRev.Encode()
	for _, tc := range []struct {
		name    string
		content []byte // nil: no file
		prefix  string
		want    string
	}{
		{"missing", nil, "/vipd/fleets/edge1/", "no fleet cache"},
		{"empty", []byte{}, "/vipd/fleets/edge1/", "not a vipd fleet cache"},
		{"another format", []byte("{\"revision\": 3}\n"), "/vipd/fleets/edge1/", "not a vipd fleet cache"},
		{"no digest", []byte(cacheMagic + "\n{}"), "/vipd/fleets/edge1/", "no sha256 line"},
		{"edited", edited, "/vipd/fleets/edge1/", "a torn or edited file"},
		{"torn", good[:len(good)-20], "/vipd/fleets/edge1/", "a torn or edited file"},
		{"revision 0", zero, "/vipd/fleets/edge1/", "revision 0"},
		{"another prefix", good, "/vipd/fleets/edge2/", `the cache of the fleet under "/vipd/fleets/edge1/", not "/vipd/fleets/edge2/"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "fleet-cache")
			if tc.content != nil {
				if err := os.WriteFile(path, tc.content, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			s, err := Load(path, tc.prefix)
			if err == nil || s != nil {
				t.Fatalf("loaded %+v, %v; want an error", s, err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %q, want one naming %s and saying %q", err, path, tc.want)
			}
			if tc.content == nil && !errors.Is(err, ErrNoCache) {
				t.Errorf("a missing cache is %v, want ErrNoCache", err)
			}
		})
	}
}
