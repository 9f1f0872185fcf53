package etcdtest_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/testing/etcdtest"
	"github.com/vipd/vipd/testing/testkit"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

func ctx(t *testing.T, d time.Duration) context.Context {
	c, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return c
}

// putGet puts key=val and reads it back.
func putGet(t *testing.T, cli *clientv3.Client, key, val string) {
	t.Helper()
	if _, err := cli.Put(ctx(t, testkit.Patience), key, val); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	resp, err := cli.Get(ctx(t, testkit.Patience), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != val {
		t.Fatalf("get %s = %v, want %q", key, resp.Kvs, val)
	}
}

func TestOneMember(t *testing.T) {
	start := time.Now()
	c := etcdtest.Start(t, 1)
	t.Logf("1 member ready in %v", time.Since(start))
	for _, ep := range c.Endpoints() {
		if !strings.HasPrefix(ep, "http://127.0.0.1:") {
			t.Errorf("endpoint %s is not on 127.0.0.1", ep)
		}
	}
	putGet(t, c.Client(t), "/vipd/k", "v")
}

// TestQuorumLoss: with 2 of 3 members killed a linearizable read fails
// (within its timeout); with them back it succeeds, and the data is kept.
func TestQuorumLoss(t *testing.T) {
	start := time.Now()
	c := etcdtest.Start(t, 3)
	t.Logf("3 members ready in %v", time.Since(start))
	if n := len(c.Endpoints()); n != 3 {
		t.Fatalf("%d endpoints, want 3", n)
	}
	cli := c.Client(t)
	putGet(t, cli, "/vipd/k", "before")

	kill := time.Now()
	c.Kill(1)
	c.Kill(2)
	t.Logf("2 members killed in %v", time.Since(kill))
	if n := len(c.Endpoints()); n != 1 {
		t.Fatalf("%d endpoints with 2 killed, want 1", n)
	}
	if _, err := cli.Get(ctx(t, time.Second), "/vipd/k"); err == nil {
		t.Fatal("a linearizable Get succeeded with 2 of 3 members killed")
	} else {
		t.Logf("Get without quorum: %v", err)
	}
	// The member left answers a serializable read from its own copy: the
	// linearizable one failed for want of a quorum, not of a server.
	testkit.Eventually(t, testkit.Patience, "a serializable Get from the member left", func() bool {
		resp, err := cli.Get(ctx(t, time.Second), "/vipd/k", clientv3.WithSerializable())
		return err == nil && len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == "before"
	})

	restart := time.Now()
	c.Restart(1)
	c.Restart(2)
	c.Ready(t)
	testkit.Eventually(t, testkit.Patience, "a linearizable Get with quorum back", func() bool {
		resp, err := cli.Get(ctx(t, time.Second), "/vipd/k")
		return err == nil && len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == "before"
	})
	t.Logf("quorum back in %v", time.Since(restart))
	putGet(t, cli, "/vipd/k", "after")
}

// TestCompact: after a compaction, reading an old revision fails with
// ErrCompacted.
func TestCompact(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cli := c.Client(t)
	first, err := cli.Put(ctx(t, testkit.Patience), "/vipd/k", "1")
	if err != nil {
		t.Fatal(err)
	}
	last, err := cli.Put(ctx(t, testkit.Patience), "/vipd/k", "2")
	if err != nil {
		t.Fatal(err)
	}
	c.Compact(t, last.Header.Revision)
	_, err = cli.Get(ctx(t, testkit.Patience), "/vipd/k", clientv3.WithRev(first.Header.Revision))
	if !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("get at a compacted revision: %v, want %v", err, rpctypes.ErrCompacted)
	}
}

// checkAuth: a user with read-only rights on a prefix can Get under it
// but not Put (permission denied); the writer can; root can anywhere.
func checkAuth(t *testing.T, c *etcdtest.Cluster) {
	t.Helper()
	const prefix = "/vipd/fleets/edge1/"
	c.EnableAuth(t, map[string]etcdtest.Role{
		"box":      {Password: "box-pw", Read: []string{prefix}, Write: []string{prefix + "boxes/box1"}},
		"operator": {Password: "op-pw", Read: []string{prefix}, Write: []string{prefix}},
	})
	putGet(t, c.Client(t), prefix+"config", "seed")

	box := c.ClientAs(t, "box", "box-pw")
	resp, err := box.Get(ctx(t, testkit.Patience), prefix+"config")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the box's Get of config: %v, %v", resp, err)
	}
	if _, err := box.Put(ctx(t, testkit.Patience), prefix+"config", "mine"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Fatalf("the box's Put of config: %v, want %v", err, rpctypes.ErrPermissionDenied)
	}
	if _, err := box.Put(ctx(t, testkit.Patience), prefix+"boxes/box1", "alive"); err != nil {
		t.Fatalf("the box's Put of its own key: %v", err)
	}
	if _, err := box.Get(ctx(t, testkit.Patience), "/other"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Fatalf("the box's Get outside the prefix: %v, want %v", err, rpctypes.ErrPermissionDenied)
	}
	putGet(t, c.ClientAs(t, "operator", "op-pw"), prefix+"config", "new seed")

	// A client authenticates when it is made.
	wrong, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: etcdtest.DialTimeout, Username: "box", Password: "wrong", Logger: zap.NewNop()})
	if err == nil {
		wrong.Close()
	}
	if !errors.Is(err, rpctypes.ErrAuthFailed) {
		t.Fatalf("a wrong password: %v, want %v", err, rpctypes.ErrAuthFailed)
	}
}

func TestAuth(t *testing.T) {
	checkAuth(t, etcdtest.Start(t, 1))
}

// TestDebianBinary runs the same checks against Debian's etcd (3.4, from
// etcd-server), the version an operator on Debian gets.
func TestDebianBinary(t *testing.T) {
	path, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("no etcd binary in PATH: Debian's etcd-server installs /usr/bin/etcd (make test-deps)")
	}
	start := time.Now()
	c := etcdtest.StartBinary(t, path)
	t.Logf("%s ready in %v", path, time.Since(start))
	cli := c.Client(t)
	st, err := cli.Status(ctx(t, testkit.Patience), c.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s is etcd %s", path, st.Version)
	putGet(t, cli, "/vipd/k", "v")

	c.Kill(0)
	c.Restart(0)
	c.Ready(t)
	resp, err := cli.Get(ctx(t, testkit.Patience), "/vipd/k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("get after a restart: %v, %v", resp, err)
	}
	checkAuth(t, c)
}
