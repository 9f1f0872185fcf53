package testbed

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/vipd/vipd/testing/nstest"
	"github.com/vipd/vipd/testing/testkit"
)

// Etcd is an etcd cluster of Debian's etcd binary in one of the bed's
// namespaces, every member on one address of it: member i serves clients
// on port 2379+2i and its peers on 2380+2i. The demos use it (the tests
// use testing/etcdtest, whose members are embedded): a box reaches it
// over the bed's links as it would reach a real cluster.
type Etcd struct {
	bed   *Bed
	ns    *nstest.NS
	addr  netip.Addr
	procs []*exec.Cmd
}

// EtcdPath is Debian's etcd (etcd-server), or an error saying how to get it.
func EtcdPath() (string, error) {
	p, err := exec.LookPath("etcd")
	if err != nil {
		return "", fmt.Errorf("needs Debian's etcd-server (/usr/bin/etcd): %w", err)
	}
	return p, nil
}

// StartEtcd starts n members in ns on addr and waits until every one
// reports healthy (the cluster has a leader). Spawn's cleanup kills them.
func (b *Bed) StartEtcd(ns *nstest.NS, addr netip.Addr, n int) *Etcd {
	b.t.Helper()
	path, err := EtcdPath()
	if err != nil {
		b.t.Fatalf("testbed: %v", err)
	}
	e := &Etcd{bed: b, ns: ns, addr: addr}
	var cluster []string
	for i := range n {
		cluster = append(cluster, fmt.Sprintf("m%d=%s", i, e.peerURL(i)))
	}
	for i := range n {
		dir := filepath.Join(b.dir, fmt.Sprintf("etcd-m%d", i))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			b.t.Fatalf("testbed: %v", err)
		}
		e.procs = append(e.procs, b.Spawn(ns, fmt.Sprintf("etcd-m%d", i), path,
			"--name", fmt.Sprintf("m%d", i), "--data-dir", dir,
			"--listen-client-urls", e.clientURL(i), "--advertise-client-urls", e.clientURL(i),
			"--listen-peer-urls", e.peerURL(i), "--initial-advertise-peer-urls", e.peerURL(i),
			"--initial-cluster", strings.Join(cluster, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "vipd-testbed"))
	}
	for i := range n {
		if !testkit.Poll(patience, func() bool { return e.healthy(i) }) {
			b.t.Fatalf("testbed: etcd member %d not healthy after %v:\n%s", i, patience, b.Log(fmt.Sprintf("etcd-m%d", i)))
		}
	}
	return e
}

func (e *Etcd) clientURL(i int) string {
	return "http://" + netip.AddrPortFrom(e.addr, uint16(2379+2*i)).String()
}

func (e *Etcd) peerURL(i int) string {
	return "http://" + netip.AddrPortFrom(e.addr, uint16(2380+2*i)).String()
}

// Endpoints are the members' client URLs.
func (e *Etcd) Endpoints() []string {
	var out []string
	for i := range e.procs {
		out = append(out, e.clientURL(i))
	}
	return out
}

// healthy asks member i's /health, from inside the cluster's namespace.
func (e *Etcd) healthy(i int) bool {
	c := &http.Client{Transport: &http.Transport{DialContext: Dialer(e.ns), DisableKeepAlives: true}, Timeout: 2 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.clientURL(i)+"/health", nil)
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"true"`)
}

// Kill SIGKILLs member i, as a crash would, and waits for it.
func (e *Etcd) Kill(i int) {
	e.procs[i].Process.Kill()
	e.procs[i].Wait()
}
