package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vipd/vipd/testing/testkit"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// RootPassword is the root user's password once EnableAuth has run.
const RootPassword = "etcdtest-root"

// DialTimeout is the dial timeout of the clients Client and ClientAs make.
const DialTimeout = 5 * time.Second

// A Cluster is a set of etcd members on 127.0.0.1 that a test started.
type Cluster struct {
	t       testing.TB
	members []*member
	// auth is set once EnableAuth has turned authentication on.
	auth bool
	// binPath is the binary StartBinary ran, for Restart.
	binPath string
}

// A member is one etcd server: embedded (e set while it runs) or a
// binary (proc set while it runs).
type member struct {
	name           string
	dir            string
	peer, client   url.URL
	initialCluster string

	e    *embed.Etcd
	proc *binary
}

func (m *member) running() bool { return m.e != nil || m.proc != nil }

// Start starts an embedded cluster of n members (1 or 3), each on two
// free TCP ports of 127.0.0.1, and returns when every member is ready.
// t.Cleanup stops them.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	if n != 1 && n != 3 {
		t.Fatalf("etcdtest.Start: %d members; 1 or 3", n)
	}
	// The ports were free when chosen; another process may take one
	// before a member binds it, and then the cluster starts over on
	// others.
	for attempt := 1; ; attempt++ {
		c := newCluster(t, n)
		err := c.startAll()
		if err == nil {
			c.Ready(t)
			return c
		}
		if !errors.Is(err, syscall.EADDRINUSE) || attempt == 3 {
			t.Fatalf("etcdtest: %v", err)
		}
		t.Logf("etcdtest: %v; starting over on other ports", err)
		c.stopAll()
	}
}

// startAll starts every member, stopping at the first that fails.
func (c *Cluster) startAll() error {
	for _, m := range c.members {
		if err := c.tryEmbedded(m); err != nil {
			return err
		}
	}
	return nil
}

// newCluster names the members, picks their ports and data directories,
// and registers the cleanup that stops whichever are running.
func newCluster(t testing.TB, n int) *Cluster {
	ports := freePorts(t, 2*n)
	c := &Cluster{t: t}
	var initial []string
	for i := range n {
		m := &member{
			name:   fmt.Sprintf("m%d", i),
			dir:    filepath.Join(t.TempDir(), fmt.Sprintf("m%d.etcd", i)),
			peer:   url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[2*i])},
			client: url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[2*i+1])},
		}
		initial = append(initial, m.name+"="+m.peer.String())
		c.members = append(c.members, m)
	}
	for _, m := range c.members {
		m.initialCluster = strings.Join(initial, ",")
	}
	t.Cleanup(c.stopAll)
	return c
}

// stopAll stops the running members, the last first.
func (c *Cluster) stopAll() {
	for i := len(c.members) - 1; i >= 0; i-- {
		if c.members[i].running() {
			c.stop(c.members[i])
		}
	}
}

// freePorts returns n distinct TCP ports of 127.0.0.1 that were free a
// moment ago: all n are held open until every one is chosen, so that the
// kernel does not hand the same port out twice.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("etcdtest: a free port: %v", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// logger is where the members log: nowhere unless ETCDTEST_LOG=1.
func logger() *zap.Logger {
	if os.Getenv("ETCDTEST_LOG") == "1" {
		if lg, err := zap.NewDevelopment(); err == nil {
			return lg
		}
	}
	return zap.NewNop()
}

// startEmbedded starts m in this process; it does not wait for it to be
// ready (a member that rejoins is ready only when a quorum is).
func (c *Cluster) startEmbedded(m *member) {
	c.t.Helper()
	if err := c.tryEmbedded(m); err != nil {
		c.t.Fatalf("etcdtest: %v", err)
	}
}

// tryEmbedded is startEmbedded, returning its error.
func (c *Cluster) tryEmbedded(m *member) error {
	cfg := embed.NewConfig()
	cfg.Name = m.name
	cfg.Dir = m.dir
	cfg.ListenPeerUrls = []url.URL{m.peer}
	cfg.AdvertisePeerUrls = []url.URL{m.peer}
	cfg.ListenClientUrls = []url.URL{m.client}
	cfg.AdvertiseClientUrls = []url.URL{m.client}
	cfg.InitialCluster = m.initialCluster
	cfg.InitialClusterToken = "etcdtest"
	cfg.ClusterState = embed.ClusterStateFlagNew // ignored when m.dir has data: a restart
	// Elections in 500 ms rather than 1 s: a cluster that lost its
	// leader recovers sooner, and a loaded machine still keeps up.
	cfg.TickMs = 50
	cfg.ElectionMs = 500
	cfg.Logger = "zap"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(logger())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("starting member %s: %w", m.name, err)
	}
	m.e = e
	return nil
}

// Ready waits, within testkit.Patience, until every running member is
// ready to serve clients.
func (c *Cluster) Ready(t testing.TB) {
	t.Helper()
	deadline := time.After(testkit.Patience)
	for _, m := range c.members {
		switch {
		case m.e != nil:
			select {
			case <-m.e.Server.ReadyNotify():
			case err := <-m.e.Err():
				t.Fatalf("etcdtest: member %s failed: %v", m.name, err)
			case <-m.e.Server.StopNotify():
				t.Fatalf("etcdtest: member %s stopped before it was ready", m.name)
			case <-deadline:
				t.Fatalf("etcdtest: timed out after %v waiting for member %s to be ready", testkit.Patience, m.name)
			}
		case m.proc != nil:
			c.waitBinary(t, m)
		}
	}
}

// Endpoints returns the running members' client URLs.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.members {
		if m.running() {
			eps = append(eps, m.client.String())
		}
	}
	return eps
}

// allEndpoints returns every member's client URL, running or not: a
// client made before a member is killed keeps the member's address and
// reaches it again when it is back.
func (c *Cluster) allEndpoints() []string {
	var eps []string
	for _, m := range c.members {
		eps = append(eps, m.client.String())
	}
	return eps
}

// Client returns a client of every member (root's once EnableAuth has
// run), closed at cleanup.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	if c.auth {
		return c.ClientAs(t, "root", RootPassword)
	}
	return c.ClientAs(t, "", "")
}

// ClientAs returns a client of every member that authenticates as user
// (none when user is empty), closed at cleanup.
func (c *Cluster) ClientAs(t testing.TB, user, password string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   c.allEndpoints(),
		DialTimeout: DialTimeout,
		Username:    user,
		Password:    password,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("etcdtest: a client as %q: %v", user, err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Kill stops member i (0-based); its data stays for Restart. An embedded
// member stops with embed's Close, as on SIGTERM: a leader hands its
// leadership over first, and etcd waits up to 1 s for its peers'
// connections, so a Kill takes about a second. A binary gets SIGKILL.
func (c *Cluster) Kill(i int) {
	c.t.Helper()
	m := c.member(i)
	if !m.running() {
		c.t.Fatalf("etcdtest: Kill(%d): member %s is not running", i, m.name)
	}
	c.stop(m)
}

// Restart starts member i again, on its ports and with its data, without
// waiting for it to be ready: wait with Ready once a quorum is back.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	m := c.member(i)
	if m.running() {
		c.t.Fatalf("etcdtest: Restart(%d): member %s is running", i, m.name)
	}
	if m.initialCluster == "" { // a binary's
		c.startBinary(m, c.binPath)
		return
	}
	c.startEmbedded(m)
}

func (c *Cluster) member(i int) *member {
	c.t.Helper()
	if i < 0 || i >= len(c.members) {
		c.t.Fatalf("etcdtest: no member %d of %d", i, len(c.members))
	}
	return c.members[i]
}

// stop stops m, within testkit.Patience.
func (c *Cluster) stop(m *member) {
	c.t.Helper()
	if m.proc != nil {
		m.proc.kill(c.t)
		m.proc = nil
		return
	}
	done := make(chan struct{})
	e := m.e
	go func() {
		e.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(testkit.Patience):
		c.t.Errorf("etcdtest: member %s did not stop within %v", m.name, testkit.Patience)
	}
	m.e = nil
}

// Compact compacts the key space up to revision rev and waits for the
// compaction to be applied (physical).
func (c *Cluster) Compact(t testing.TB, rev int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Patience)
	defer cancel()
	if _, err := c.Client(t).Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		t.Fatalf("etcdtest: compacting to revision %d: %v", rev, err)
	}
}

// A Role is what EnableAuth grants a user: reading the keys under each
// of Read's prefixes, writing (put, delete) those under Write's. A prefix
// in both may be read and written.
type Role struct {
	Password string
	Read     []string
	Write    []string
}

// EnableAuth creates the root user with RootPassword, and for each user a
// role of the same name granting its Role, then turns authentication on.
// From then on Client connects as root.
func (c *Cluster) EnableAuth(t testing.TB, users map[string]Role) {
	t.Helper()
	if c.auth {
		t.Fatal("etcdtest: EnableAuth twice")
	}
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Patience)
	defer cancel()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("etcdtest: EnableAuth: %s: %v", what, err)
		}
	}
	_, err := cli.UserAdd(ctx, "root", RootPassword)
	must("adding root", err)
	_, err = cli.UserGrantRole(ctx, "root", "root")
	must("granting root the root role", err)
	for name, r := range users {
		if name == "root" {
			t.Fatal("etcdtest: EnableAuth: root is made by EnableAuth")
		}
		_, err = cli.RoleAdd(ctx, name)
		must("adding role "+name, err)
		perms := map[string]clientv3.PermissionType{}
		for _, p := range r.Read {
			perms[p] = clientv3.PermissionType(clientv3.PermRead)
		}
		for _, p := range r.Write {
			if old, ok := perms[p]; ok && old == clientv3.PermissionType(clientv3.PermRead) {
				perms[p] = clientv3.PermissionType(clientv3.PermReadWrite)
			} else {
				perms[p] = clientv3.PermissionType(clientv3.PermWrite)
			}
		}
		for p, perm := range perms {
			_, err = cli.RoleGrantPermission(ctx, name, p, clientv3.GetPrefixRangeEnd(p), perm)
			must(fmt.Sprintf("granting %s %v on %q", name, perm, p), err)
		}
		_, err = cli.UserAdd(ctx, name, r.Password)
		must("adding user "+name, err)
		_, err = cli.UserGrantRole(ctx, name, name)
		must("granting "+name+" its role", err)
	}
	_, err = cli.AuthEnable(ctx)
	must("enabling authentication", err)
	c.auth = true
}
