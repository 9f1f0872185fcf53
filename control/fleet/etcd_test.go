package fleet

import (
	"context"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vipd/vipd/testing/etcdtest"
	"github.com/vipd/vipd/testing/testkit"
)

const testPrefix = "/vipd/fleets/test/"

// TestEtcdWatcher: against a real etcd, the watcher applies the keys it
// finds, then each change as one revision (a transaction of the config
// and an override applies once, with both), and ignores keys outside the
// prefix.
func TestEtcdWatcher(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Patience)
	defer cancel()
	if _, err := cli.Put(ctx, testPrefix+"config", "v1"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/vipd/fleets/other/config", "not ours"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var applied []*Keys
	w := &Watcher{Store: &EtcdStore{Client: cli, Prefix: testPrefix}, Retry: 50 * time.Millisecond, Apply: func(k *Keys) error {
		mu.Lock()
		defer mu.Unlock()
		applied = append(applied, k)
		return nil
	}}
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(rctx) }()
	t.Cleanup(func() { stop(); <-done })
	if !testkit.Poll(testkit.Patience, func() bool { return w.State().Revision > 0 }) {
		t.Fatalf("nothing applied: %+v", w.State())
	}
	txn, err := cli.Txn(ctx).Then(
		clientv3.OpPut(testPrefix+"config", "v2"),
		clientv3.OpPut(testPrefix+"overrides/web/198.18.1.11:8080", `{"drain":true}`),
	).Commit()
	if err != nil {
		t.Fatal(err)
	}
	rev := txn.Header.Revision
	if !testkit.Poll(testkit.Patience, func() bool { return w.State().Revision == rev }) {
		t.Fatalf("revision %d not applied: %+v", rev, w.State())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(applied) != 2 {
		t.Fatalf("%d applies, want 2 (the first read, the transaction)", len(applied))
	}
	last := applied[1]
	if string(last.Config) != "v2" || len(last.Overrides) != 1 || len(last.Ignored) != 0 {
		t.Errorf("the transaction applied as %+v", last)
	}
	if st := w.State(); !st.Connected || st.EtcdError != "" {
		t.Errorf("state %+v", st)
	}
}

// TestEtcdCompacted: a watch from a revision compacted away says so, and
// the watcher then reads the keys again.
func TestEtcdCompacted(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Patience)
	defer cancel()
	var rev int64
	for _, v := range []string{"v1", "v2", "v3"} {
		resp, err := cli.Put(ctx, testPrefix+"config", v)
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	c.Compact(t, rev)
	s := &EtcdStore{Client: cli, Prefix: testPrefix}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	select {
	case b := <-s.Watch(wctx, 2):
		if !b.Compacted {
			t.Errorf("a watch from a compacted revision gave %+v", b)
		}
	case <-ctx.Done():
		t.Fatal("no answer from a watch from a compacted revision")
	}
}
