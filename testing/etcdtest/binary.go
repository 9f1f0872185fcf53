package etcdtest

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vipd/vipd/testing/testkit"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// A binary is an etcd process StartBinary started.
type binary struct {
	cmd    *exec.Cmd
	out    *testkit.Buffer
	exited chan struct{}
	err    error // the process's exit, once exited is closed
}

// StartBinary runs the etcd binary at path (Debian's etcd-server installs
// /usr/bin/etcd) as a single member on two free TCP ports of 127.0.0.1,
// with its data under t.TempDir(), and returns when it answers a Status.
// t.Cleanup kills it by its PID; its output is printed if the test fails.
func StartBinary(t testing.TB, path string) *Cluster {
	t.Helper()
	c := newCluster(t, 1)
	c.binPath = path
	m := c.members[0]
	m.initialCluster = "" // marks a binary's member for Restart
	c.startBinary(m, path)
	c.Ready(t)
	return c
}

// startBinary starts the process of m without waiting for it.
func (c *Cluster) startBinary(m *member, path string) {
	c.t.Helper()
	cmd := exec.Command(path,
		"--name", m.name,
		"--data-dir", m.dir,
		"--listen-peer-urls", m.peer.String(),
		"--initial-advertise-peer-urls", m.peer.String(),
		"--listen-client-urls", m.client.String(),
		"--advertise-client-urls", m.client.String(),
		"--initial-cluster", m.name+"="+m.peer.String(),
		"--initial-cluster-token", "etcdtest",
	)
	// etcd reads ETCD_* from its environment as flags: only the test's
	// flags count.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ETCD") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	b := &binary{cmd: cmd, out: &testkit.Buffer{}, exited: make(chan struct{})}
	cmd.Stdout = b.out
	cmd.Stderr = b.out
	if os.Getenv("ETCDTEST_LOG") == "1" {
		cmd.Stdout = os.Stderr
		cmd.Stderr = os.Stderr
	}
	// Killed with the test binary if it dies before the cleanup runs.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("etcdtest: starting %s: %v", path, err)
	}
	go func() {
		b.err = cmd.Wait()
		close(b.exited)
	}()
	t := c.t
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("etcdtest: %s (member %s, PID %d) printed:\n%s", path, m.name, cmd.Process.Pid, b.out.String())
		}
	})
	m.proc = b
}

// waitBinary waits, within testkit.Patience, until m's process answers a
// Status on its client URL.
func (c *Cluster) waitBinary(t testing.TB, m *member) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{m.client.String()},
		DialTimeout: DialTimeout,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("etcdtest: a client of %s: %v", m.name, err)
	}
	defer cli.Close()
	var last error
	ok := testkit.Poll(testkit.Patience, func() bool {
		select {
		case <-m.proc.exited:
			return true
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, last = cli.Status(ctx, m.client.String())
		return last == nil
	})
	select {
	case <-m.proc.exited:
		t.Fatalf("etcdtest: %s exited (%v) before it was ready:\n%s", m.proc.cmd.Path, m.proc.err, m.proc.out.String())
	default:
	}
	if !ok {
		t.Fatalf("etcdtest: timed out after %v waiting for %s to answer (last: %v)", testkit.Patience, m.proc.cmd.Path, last)
	}
}

// kill kills the process by its PID and waits, within testkit.Patience,
// for it to exit.
func (b *binary) kill(t testing.TB) {
	t.Helper()
	if err := b.cmd.Process.Kill(); err != nil {
		select {
		case <-b.exited:
			return
		default:
		}
		t.Errorf("etcdtest: killing %s (PID %d): %v", b.cmd.Path, b.cmd.Process.Pid, err)
		return
	}
	select {
	case <-b.exited:
	case <-time.After(testkit.Patience):
		t.Errorf("etcdtest: %s (PID %d) did not exit within %v of SIGKILL", b.cmd.Path, b.cmd.Process.Pid, testkit.Patience)
	}
}
