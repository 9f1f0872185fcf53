package fleet

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vipd/vipd/testing/etcdtest"
	"github.com/vipd/vipd/testing/testkit"
)

// TestBoxKey: the status is written under a lease; a lease revoked from
// outside (as when it expires) is granted again and the latest status
// written again; when the box stops, the key goes at once.
func TestBoxKey(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cli := c.Client(t)
	k := &BoxKey{Client: cli, Prefix: testPrefix, Box: "box1", TTL: 5, Retry: 50 * time.Millisecond}
	updates := make(chan BoxStatus)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); k.Run(ctx, updates) }()
	t.Cleanup(func() { cancel(); <-done })

	read := func() (BoxStatus, int64, bool) {
		rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
		defer rcancel()
		resp, err := cli.Get(rctx, k.Key())
		if err != nil || len(resp.Kvs) == 0 {
			return BoxStatus{}, 0, false
		}
		s, err := DecodeBoxStatus(resp.Kvs[0].Value)
		return s, resp.Kvs[0].Lease, err == nil
	}
	updates <- BoxStatus{Box: "box1", Revision: 7}
	var lease int64
	if !testkit.Poll(testkit.Patience, func() bool {
		s, l, ok := read()
		lease = l
		return ok && s.Revision == 7 && l != 0
	}) {
		t.Fatal("the status was not written under a lease")
	}
	rctx, rcancel := context.WithTimeout(context.Background(), testkit.Patience)
	defer rcancel()
	if _, err := cli.Revoke(rctx, clientv3.LeaseID(lease)); err != nil {
		t.Fatal(err)
	}
	if !testkit.Poll(testkit.Patience, func() bool {
		s, l, ok := read()
		return ok && s.Revision == 7 && l != 0 && l != lease
	}) {
		t.Fatal("after its lease went, the status was not written again under a new one")
	}
	cancel()
	<-done
	if _, _, ok := read(); ok {
		t.Error("the key outlived the box")
	}
}
