package fleet

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/testing/etcdtest"
	"github.com/vipd/vipd/testing/fleetgen"
	"github.com/vipd/vipd/testing/testkit"
)

// TestPushPull: a push writes only over the revision it read; a push
// over a stale one is refused with ErrChanged and changes nothing.
func TestPushPull(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Patience)
	defer cancel()
	doc, mod, err := Pull(ctx, cli, testPrefix)
	if err != nil || doc != nil || mod != 0 {
		t.Fatalf("an empty fleet pulls %q at %d, %v", doc, mod, err)
	}
	rev1, err := Push(ctx, cli, testPrefix, []byte("v1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Push(ctx, cli, testPrefix, []byte("v1 again"), 0); !errors.Is(err, ErrChanged) {
		t.Errorf("a second first push: %v, want ErrChanged", err)
	}
	rev2, err := Push(ctx, cli, testPrefix, []byte("v2"), rev1)
	if err != nil || rev2 <= rev1 {
		t.Fatalf("push over revision %d: %d, %v", rev1, rev2, err)
	}
	if _, err := Push(ctx, cli, testPrefix, []byte("v3"), rev1); !errors.Is(err, ErrChanged) {
		t.Errorf("a push over a stale revision: %v, want ErrChanged", err)
	}
	if doc, mod, err := Pull(ctx, cli, testPrefix); string(doc) != "v2" || mod != rev2 || err != nil {
		t.Errorf("pulled %q at %d, %v; want v2 at %d", doc, mod, err, rev2)
	}

	// 1,000 VIPs of 100 backends: 5 MB of TOML, over etcd's 1.5 MiB a
	// request, stored compressed in the one key, read back whole by Pull
	// and by a watcher.
	big := fleetgen.Shared(1000, 100, 0)
	rev3, err := Push(ctx, cli, testPrefix, big, rev2)
	if err != nil {
		t.Fatalf("push of %d bytes: %v", len(big), err)
	}
	if doc, mod, err := Pull(ctx, cli, testPrefix); !bytes.Equal(doc, big) || mod != rev3 || err != nil {
		t.Errorf("pulled %d bytes at %d, %v; want the %d pushed at %d", len(doc), mod, err, len(big), rev3)
	}
	resp, err := cli.Get(ctx, testPrefix+KeyConfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d bytes of TOML stored as %d", len(big), len(resp.Kvs[0].Value))
	k, err := Read(ctx, &EtcdStore{Client: cli, Prefix: testPrefix})
	if err != nil || !bytes.Equal(k.Config, big) || k.ConfigErr != nil {
		t.Errorf("a watcher's read: %d bytes, %v, %v", len(k.Config), k.ConfigErr, err)
	}

	// A document too large even compressed is refused before etcd is
	// asked, saying why.
	if _, err := Push(ctx, cli, testPrefix, incompressible(3<<20), rev3); err == nil || !strings.Contains(err.Error(), "--max-request-bytes") {
		t.Errorf("push of 3 MiB that does not compress: %v", err)
	}
}

// incompressible returns n bytes gzip cannot shrink (a fixed seed).
func incompressible(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestDecodeConfig: a compressed value that does not decompress is an
// error the box reports; plain TOML passes as it is.
func TestDecodeConfig(t *testing.T) {
	if doc, err := DecodeConfig([]byte("flow_hash_seed = 1\n")); err != nil || string(doc) != "flow_hash_seed = 1\n" {
		t.Errorf("plain: %q, %v", doc, err)
	}
	v, err := EncodeConfig(fleetgen.Shared(100, 100, 0))
	if err != nil || !bytes.HasPrefix(v, gzipMagic) {
		t.Fatalf("a large document is not compressed: %v", err)
	}
	if _, err := DecodeConfig(v[:len(v)/2]); err == nil {
		t.Error("a torn compressed value decoded")
	}
	k := &Keys{}
	k.apply(Event{Key: KeyConfig, Value: v[:len(v)/2]})
	local, _, err := config.Parse("vipd.toml", []byte(composeLocal))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compose(local, k); err == nil || !strings.Contains(err.Error(), "compressed value") {
		t.Errorf("composing a torn value: %v", err)
	}
}

// TestOverridesAndWait: an override written and deleted reaches a
// watcher's keys; WaitApplied names the boxes behind until they catch up.
func TestOverridesAndWait(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Patience)
	defer cancel()
	be := netip.MustParseAddrPort("198.18.1.11:8080")
	rev, err := SetOverride(ctx, cli, testPrefix, "web", be, &Override{Drain: true, By: "ops", Why: "kernel upgrade"})
	if err != nil {
		t.Fatal(err)
	}
	_, kvs, err := (&EtcdStore{Client: cli, Prefix: testPrefix}).Get(ctx)
	if err != nil || len(kvs) != 1 {
		t.Fatalf("keys %v, %v", kvs, err)
	}
	o, err := ParseOverride(kvs[0].Key[len(KeyOverrides):], kvs[0].Value)
	if err != nil || !o.Drain || o.By != "ops" || o.Backend != be {
		t.Errorf("the override reads back as %+v, %v", o, err)
	}
	w := uint32(1001)
	if _, err := SetOverride(ctx, cli, testPrefix, "web", be, &Override{Weight: &w}); err == nil {
		t.Error("a weight of 1001 was written")
	}

	for _, b := range []BoxStatus{{Box: "box1", Revision: rev}, {Box: "box2", Revision: rev - 1}} {
		v, _ := b.Encode()
		if _, err := cli.Put(ctx, testPrefix+KeyBoxes+b.Box, string(v)); err != nil {
			t.Fatal(err)
		}
	}
	short, scancel := context.WithTimeout(ctx, 100*time.Millisecond)
	behind, err := WaitApplied(short, cli, testPrefix, rev)
	scancel()
	if err != nil || !slices.Equal(behind, []string{"box2"}) {
		t.Errorf("behind %v, %v; want box2", behind, err)
	}
	// A wait whose deadline passed before etcd answered any poll says so:
	// it cannot name the boxes behind.
	done, dcancel := context.WithCancel(ctx)
	dcancel()
	if behind, err := WaitApplied(done, cli, testPrefix, rev); err == nil {
		t.Errorf("a wait etcd never answered: behind %v, no error", behind)
	}
	v, _ := (&BoxStatus{Box: "box2", Revision: rev}).Encode()
	if _, err := cli.Put(ctx, testPrefix+KeyBoxes+"box2", string(v)); err != nil {
		t.Fatal(err)
	}
	if behind, err := WaitApplied(ctx, cli, testPrefix, rev); err != nil || len(behind) != 0 {
		t.Errorf("after box2 caught up: behind %v, %v", behind, err)
	}
	if _, err := SetOverride(ctx, cli, testPrefix, "web", be, nil); err != nil {
		t.Fatal(err)
	}
	if _, kvs, _ := (&EtcdStore{Client: cli, Prefix: testPrefix}).Get(ctx); len(kvs) != 2 {
		t.Errorf("after the delete, keys %v: want the two box keys", kvs)
	}
}
