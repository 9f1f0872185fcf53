package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// previousConfig is a GUE DSR VIP with previous_owner over the backends
// 198.18.1.11 and up, its state in state.
func previousConfig(state string, backends int, ttl string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `
[dataplane]
ingress = "eth0"
egress = "eth1"
state_file = %q
[conntrack]
capacity = 65536
[admin]
listen = "127.0.0.1:0"
socket = "@SOCKET@"
[[vip]]
name = "dsr"
address = "198.18.0.101"
port = 80
mode = "dsr"
encap = "gue"
encap_source = "198.18.1.1"
previous_owner = true
previous_owner_ttl = %q
[vip.healthcheck]
type = "none"
`, state, ttl)
	for i := 0; i < backends; i++ {
		fmt.Fprintf(&b, "[[vip.backend]]\naddress = \"198.18.1.%d\"\n", 11+i)
	}
	return b.String()
}

// hinted sends a mid-stream packet of flow sport and returns the outer
// destination and the previous owner its GUE header names (invalid: none).
func (td *testDaemon) hinted(sport uint16) (dst, prev netip.Addr) {
	td.t.Helper()
	q := td.plat.queues[0]
	q.Inject(syn(td.t, "198.18.0.101", sport, "A"), 0)
	select {
	case f := <-q.Output():
		p := gopacket.NewPacket(f.Data, layers.LayerTypeEthernet, gopacket.Default)
		ip, _ := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		udp, _ := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
		if ip == nil || udp == nil || udp.DstPort != 6080 {
			td.t.Fatalf("not GUE:\n%s", p.Dump())
		}
		dst, _ = netip.AddrFromSlice(ip.DstIP.To4())
		if g := udp.Payload; g[0]>>6 == 0 {
			if g[0] != 2 || g[1] != 4 || g[4] != 'v' || g[5] != 'p' || g[6] != 1 {
				td.t.Fatalf("GUE header % x", g[:8])
			}
			prev = netip.AddrFrom4([4]byte(g[8:12]))
		}
		return dst, prev
	case <-time.After(30 * time.Second):
		td.t.Fatalf("nothing forwarded")
	}
	return
}

// TestPreviousOwnerDaemon: a reload that adds a backend to a
// previous_owner VIP gives mid-stream misses that the old set would have
// sent elsewhere a hint naming the old owner; the state file keeps the
// previous set across a restart; at previous_owner_ttl it expires, the
// hints stop, and the metric goes.
func TestPreviousOwnerDaemon(t *testing.T) {
	// The ttl must outlast what comes before the restarted daemon's check
	// that it kept the previous set (200 flows, a stop and a start), which
	// a busy machine stretches: the test waits for it to expire, though.
	const ttl = 10 * time.Second
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	td := start(t, previousConfig(state, 3, ttl.String()))
	if _, ok := td.d.snaps.Load().WherePrevious(netip.MustParseAddr("198.18.0.101"), 6, 80, netip.MustParseAddrPort("198.18.0.1:1")); ok {
		t.Fatal("a previous table before any change")
	}
	td.rewrite(previousConfig(state, 4, ttl.String()))
	// The previous set's ttl starts while Reload runs: somewhere between
	// reloading and changed. The expiry bounds below use the matching end.
	reloading := time.Now()
	if err := td.d.Reload(); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	b, err := os.ReadFile(state)
	if err != nil || !strings.Contains(string(b), "198.18.1.13") || !strings.Contains(string(b), "198.18.1.14") {
		t.Fatalf("state file: %v\n%s", err, b)
	}
	if m := td.d.Metrics(); m.PreviousUntil["dsr"].IsZero() {
		t.Errorf("no vipd_vip_previous_owner_expiry_seconds for the VIP: %v", m.PreviousUntil)
	}
	st, err := td.d.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// vipd status prints it as "previous-owner until" (TestWriteStatus in
	// cmd/vipd).
	if st.VIPs[0].PreviousUntil.IsZero() {
		t.Errorf("the state does not show the previous set: %+v", st.VIPs[0])
	}
	snap := td.d.snaps.Load()
	// /v1/where names the previous owner where it differs.
	withPrev := 0
	for p := 1; p <= 100; p++ {
		c := netip.AddrPortFrom(netip.MustParseAddr("198.18.0.1"), uint16(p))
		ans, err := td.d.Where("dsr", c.String(), 0)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := snap.WherePrevious(netip.MustParseAddr("198.18.0.101"), 6, 80, c)
		switch {
		case ans.Previous == "" && want.String() != ans.Backend:
			t.Fatalf("where %v: %+v, previous owner %v", c, ans, want)
		case ans.Previous != "" && (ans.Previous != want.String() || ans.Previous == ans.Backend):
			t.Fatalf("where %v: %+v, previous owner %v", c, ans, want)
		}
		if ans.Previous != "" {
			withPrev++
		}
	}
	if withPrev == 0 {
		t.Error("where named no previous owner for 100 flows")
	}
	count := func(td *testDaemon, first uint16) (hints int) {
		t.Helper()
		for p := first; p < first+100; p++ {
			c := netip.AddrPortFrom(netip.MustParseAddr("198.18.0.1"), p)
			wantPrev, _ := snap.WherePrevious(netip.MustParseAddr("198.18.0.101"), 6, 80, c)
			dst, prev := td.hinted(p)
			switch {
			case prev.IsValid() && (prev != wantPrev || prev == dst):
				t.Fatalf("flow %d to %v: hint %v, previous owner %v", p, dst, prev, wantPrev)
			case !prev.IsValid() && wantPrev != dst:
				t.Fatalf("flow %d to %v: no hint, previous owner %v", p, dst, wantPrev)
			}
			if prev.IsValid() {
				hints++
			}
		}
		return hints
	}
	if n := count(td, 5000); n == 0 || n > 60 {
		t.Fatalf("%d of 100 mid-stream flows hinted after a fourth backend came", n)
	}
	if err := td.stop(); err != nil {
		t.Fatal(err)
	}

	// Restarted with the same file: the same previous set, same hints.
	td2 := start(t, previousConfig(state, 4, ttl.String()))
	if _, ok := td2.d.snaps.Load().WherePrevious(netip.MustParseAddr("198.18.0.101"), 6, 80, netip.MustParseAddrPort("198.18.0.1:1")); !ok {
		t.Fatal("the restarted daemon has no previous table")
	}
	if n := count(td2, 6000); n == 0 {
		t.Fatal("no hints after a restart")
	}
	// Expiry: a publication takes the previous table away, on time on an
	// idle machine; a busy one may publish it late.
	deadline := changed.Add(ttl + 30*time.Second)
	for {
		if _, ok := td2.d.snaps.Load().WherePrevious(netip.MustParseAddr("198.18.0.101"), 6, 80, netip.MustParseAddrPort("198.18.0.1:1")); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the previous table outlived previous_owner_ttl")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if time.Since(reloading) < ttl {
		t.Fatalf("the previous table went %v after the reload began, before its ttl", time.Since(reloading))
	}
	for p := uint16(7000); p < 7050; p++ {
		if _, prev := td2.hinted(p); prev.IsValid() {
			t.Fatalf("flow %d: a hint after the previous set expired", p)
		}
	}
	if m := td2.d.Metrics(); !m.PreviousUntil["dsr"].IsZero() {
		t.Errorf("expiry metric after expiry: %v", m.PreviousUntil)
	}
}

// TestPreviousStateFileErrors: an unreadable state file and an unwritable
// directory are counted and logged, never fatal.
func TestPreviousStateFileErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "state.json")
	if err := os.WriteFile(bad, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	td := start(t, previousConfig(bad, 3, "1h"))
	if n := td.d.Metrics().StateErrors; n != 1 {
		t.Errorf("state errors after a corrupt file: %d, want 1", n)
	}
	td.stop()
	// The corrupt file is kept for the operator, not overwritten by the
	// publishes since.
	if b, err := os.ReadFile(bad + ".unreadable"); err != nil || string(b) != "{not json" {
		t.Errorf("the corrupt state file kept aside: %q, %v", b, err)
	}
	missing := filepath.Join(dir, "no", "such", "dir", "state.json")
	td = start(t, previousConfig(missing, 3, "1h"))
	if n := td.d.Metrics().StateErrors; n != 1 {
		t.Errorf("state errors after a write into a missing directory: %d, want 1", n)
	}
}

// TestWriteFileDurably: the state file is replaced whole, and no
// temporary file is left behind, also when the replacement fails.
func TestWriteFileDurably(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	for _, b := range []string{"first", "second, longer"} {
		if err := writeFileDurably(path, []byte(b)); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != b {
			t.Errorf("read back %q, %v; want %q", got, err, b)
		}
	}
	if err := writeFileDurably(filepath.Join(dir, "missing", "state.json"), []byte("x")); err == nil {
		t.Errorf("a file in a missing directory was written")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("files left in the directory: %v", ents)
	}
}
