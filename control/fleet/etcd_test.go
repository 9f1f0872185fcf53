package fleet

import (
	"context"
	"os/exec"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vipd/vipd/testing/etcdtest"
	"github.com/vipd/vipd/testing/testkit"
)

const testPrefix = "/vipd/fleets/test/"

// etcds are the etcd servers the watcher is tested against: the
// embedded one vipd's client is built with, and Debian's etcd-server
// (3.4), the one an operator on Debian gets.
var etcds = []struct {
	name  string
	start func(t *testing.T) *etcdtest.Cluster
}{
	{"embedded", func(t *testing.T) *etcdtest.Cluster { return etcdtest.Start(t, 1) }},
	{"debian", func(t *testing.T) *etcdtest.Cluster {
		path, err := exec.LookPath("etcd")
		if err != nil {
			t.Skip("no etcd binary in PATH: Debian's etcd-server installs /usr/bin/etcd (make test-deps)")
		}
		return etcdtest.StartBinary(t, path)
	}},
}

// TestEtcdWatcher: against a real etcd, the watcher applies the keys it
// finds, then each change as one revision (a transaction of the config
// and an override applies once, with both), ignores keys outside the
// prefix, and on a quiet fleet still learns it is current (progress
// requests).
func TestEtcdWatcher(t *testing.T) {
	for _, e := range etcds {
		t.Run(e.name, func(t *testing.T) { testEtcdWatcher(t, e.start(t)) })
	}
}

func testEtcdWatcher(t *testing.T, c *etcdtest.Cluster) {
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
	w := &Watcher{Store: &EtcdStore{Client: cli, Prefix: testPrefix, Progress: 100 * time.Millisecond}, Retry: 50 * time.Millisecond, Apply: func(k *Keys) error {
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
	// Nothing changes from here on: progress notifications alone move
	// Current.
	was := w.State().Current
	if !testkit.Poll(testkit.Patience, func() bool { return w.State().Current.After(was.Add(200 * time.Millisecond)) }) {
		t.Errorf("a quiet fleet's watch never learned it is current: %+v", w.State())
	}
	if st := w.State(); st.Revision != rev || len(applied) != 2 {
		t.Errorf("progress applied something: %+v, %d applies", st, len(applied))
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
