package fleet

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/vipd/vipd/testing/etcdtest"
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
