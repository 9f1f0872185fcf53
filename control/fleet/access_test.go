package fleet

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/testing/etcdtest"
	"github.com/vipd/vipd/testing/testkit"
)

// TestAccess: with etcd's authentication on and the two roles the design
// documents, a box reads the fleet and keeps its status key, but cannot
// write the configuration or an override; an operator can.
func TestAccess(t *testing.T) {
	c := etcdtest.Start(t, 1)
	c.EnableAuth(t, map[string]etcdtest.Role{
		"box1":     {Password: "box-secret", Read: []string{testPrefix}, Write: []string{testPrefix + KeyBoxes}},
		"operator": {Password: "op-secret", Read: []string{testPrefix}, Write: []string{testPrefix}},
	})
	op := c.ClientAs(t, "operator", "op-secret")
	box := c.ClientAs(t, "box1", "box-secret")
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Patience)
	defer cancel()
	if _, err := op.Put(ctx, testPrefix+KeyConfig, "v1"); err != nil {
		t.Fatalf("the operator cannot write the configuration: %v", err)
	}
	if _, kvs, err := (&EtcdStore{Client: box, Prefix: testPrefix}).Get(ctx); err != nil || len(kvs) != 1 {
		t.Fatalf("the box reads %v, %v", kvs, err)
	}
	for _, key := range []string{KeyConfig, KeyOverrides + "web/198.18.1.11:8080"} {
		_, err := box.Put(ctx, testPrefix+key, `{"drain":true}`)
		if err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("the box wrote %s: %v", key, err)
		}
	}
	k := &BoxKey{Client: box, Prefix: testPrefix, Box: "box1", Retry: 50 * time.Millisecond}
	updates := make(chan BoxStatus, 1)
	updates <- BoxStatus{Box: "box1", Revision: 2}
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); k.Run(rctx, updates) }()
	t.Cleanup(func() { stop(); <-done })
	if !testkit.Poll(testkit.Patience, func() bool {
		resp, err := op.Get(ctx, k.Key())
		return err == nil && len(resp.Kvs) == 1
	}) {
		t.Fatal("the box could not keep its status key")
	}
}
