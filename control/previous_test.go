package control

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/dataplane"
)

// prevConfig is a GUE DSR VIP with previous_owner and the given backends
// ("addr" or "addr weight W" or "addr state S").
func prevConfig(t *testing.T, ttl string, backends ...string) *config.Config {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "[dataplane]\ningress = \"eth0\"\negress = \"eth1\"\n[[vip]]\nname = \"d\"\naddress = \"198.18.0.101\"\nport = 80\nmode = \"dsr\"\nencap = \"gue\"\nprevious_owner = true\nprevious_owner_ttl = %q\n", ttl)
	for _, be := range backends {
		f := strings.Fields(be)
		fmt.Fprintf(&b, "[[vip.backend]]\naddress = %q\n", f[0])
		if len(f) == 3 {
			if f[1] == "weight" {
				fmt.Fprintf(&b, "weight = %s\n", f[2])
			} else {
				fmt.Fprintf(&b, "%s = %q\n", f[1], f[2])
			}
		}
	}
	return load(t, b.String())
}

// TestPreviousObserve: the first configuration has no previous set; a
// change of the set (added, re-weighted, drained) keeps the one before it
// for previous_owner_ttl; an unchanged reload keeps everything; a health
// change is not a change; a VIP that leaves is forgotten.
func TestPreviousObserve(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	p := NewPrevious()
	three := prevConfig(t, "1h", "198.18.1.11", "198.18.1.12", "198.18.1.13")
	if ch, dirty := p.Observe(three, t0); len(ch) != 0 || !dirty {
		t.Fatalf("first observation: %v, dirty %v", ch, dirty)
	}
	v := &three.VIPs[0]
	if prev, _ := p.For(v, t0); prev != nil {
		t.Fatalf("a previous set before any change: %v", prev)
	}
	if ch, dirty := p.Observe(three, t0.Add(time.Minute)); len(ch) != 0 || dirty {
		t.Fatalf("unchanged reload: %v, dirty %v", ch, dirty)
	}
	four := prevConfig(t, "1h", "198.18.1.11", "198.18.1.12", "198.18.1.13", "198.18.1.14")
	t1 := t0.Add(2 * time.Minute)
	ch, dirty := p.Observe(four, t1)
	if len(ch) != 1 || ch[0].VIP != "d" || !ch[0].Until.Equal(t1.Add(time.Hour)) || !dirty {
		t.Fatalf("a backend added: %v, dirty %v", ch, dirty)
	}
	prev, until := p.For(&four.VIPs[0], t1.Add(59*time.Minute))
	want := []dataplane.PreviousBackend{
		{Addr: netip.MustParseAddr("198.18.1.11"), Weight: 1000},
		{Addr: netip.MustParseAddr("198.18.1.12"), Weight: 1000},
		{Addr: netip.MustParseAddr("198.18.1.13"), Weight: 1000},
	}
	if fmt.Sprint(prev) != fmt.Sprint(want) || !until.Equal(t1.Add(time.Hour)) {
		t.Fatalf("previous set %v until %v, want %v until %v", prev, until, want, t1.Add(time.Hour))
	}
	if prev, _ := p.For(&four.VIPs[0], t1.Add(time.Hour)); prev != nil {
		t.Fatalf("previous set after its ttl: %v", prev)
	}
	// Draining one is a change: the set with it becomes the previous.
	drained := prevConfig(t, "1h", "198.18.1.11", "198.18.1.12 state draining", "198.18.1.13", "198.18.1.14")
	if ch, _ := p.Observe(drained, t1.Add(time.Hour)); len(ch) != 1 {
		t.Fatalf("a drain: %v", ch)
	}
	if prev, _ := p.For(&drained.VIPs[0], t1.Add(time.Hour)); len(prev) != 4 {
		t.Fatalf("after the drain the previous set is %v, want the four", prev)
	}
	// And a weight.
	heavy := prevConfig(t, "1h", "198.18.1.11 weight 3", "198.18.1.12 state draining", "198.18.1.13", "198.18.1.14")
	if ch, _ := p.Observe(heavy, t1.Add(2*time.Hour)); len(ch) != 1 {
		t.Fatalf("a weight: %v", ch)
	}
	// Gone.
	none := load(t, "[dataplane]\ningress = \"eth0\"\n")
	if _, dirty := p.Observe(none, t1.Add(3*time.Hour)); !dirty || len(p.Keys()) != 0 {
		t.Fatalf("the VIP left: dirty %v, keys %v", dirty, p.Keys())
	}
}

// TestPreviousRestart: what Marshal wrote, UnmarshalPrevious reads back,
// and a box that restarts — with the same file, or with one changed while
// it was down — ends up with the previous set a box that saw the change
// live has.
func TestPreviousRestart(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	three := prevConfig(t, "1h", "198.18.1.11", "198.18.1.12", "198.18.1.13")
	four := prevConfig(t, "1h", "198.18.1.11", "198.18.1.12", "198.18.1.13", "198.18.1.14")
	live := NewPrevious()
	live.Observe(three, t0)
	live.Observe(four, t0.Add(time.Minute))
	want, _ := live.For(&four.VIPs[0], t0.Add(2*time.Minute))

	b, err := live.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	restarted, err := UnmarshalPrevious(b)
	if err != nil {
		t.Fatal(err)
	}
	if ch, _ := restarted.Observe(four, t0.Add(2*time.Minute)); len(ch) != 0 {
		t.Fatalf("restart with the same file: changes %v", ch)
	}
	got, _ := restarted.For(&four.VIPs[0], t0.Add(2*time.Minute))
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after a restart: %v, want %v", got, want)
	}

	// Stopped with three, started with four.
	down := NewPrevious()
	down.Observe(three, t0)
	b, _ = down.Marshal()
	started, err := UnmarshalPrevious(b)
	if err != nil {
		t.Fatal(err)
	}
	if ch, _ := started.Observe(four, t0.Add(time.Hour)); len(ch) != 1 {
		t.Fatalf("started with a changed file: changes %v", ch)
	}
	got, _ = started.For(&four.VIPs[0], t0.Add(time.Hour))
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("started with a changed file: %v, want %v", got, want)
	}
	for _, bad := range []string{"", "{", `{"version": 2}`} {
		if _, err := UnmarshalPrevious([]byte(bad)); err == nil {
			t.Errorf("UnmarshalPrevious(%q) accepted it", bad)
		}
	}
}

// TestPreviousTableIsTheOldTable: the previous set Previous keeps, built
// into a snapshot, gives every flow the backend the snapshot of the old
// configuration (all healthy) gave it — the premise of the hints.
func TestPreviousTableIsTheOldTable(t *testing.T) {
	t0 := time.Now()
	three := prevConfig(t, "1h", "198.18.1.11 weight 2", "198.18.1.12", "198.18.1.13", "198.18.1.15 state draining")
	four := prevConfig(t, "1h", "198.18.1.11 weight 2", "198.18.1.12", "198.18.1.13", "198.18.1.14", "198.18.1.15")
	p := NewPrevious()
	p.Observe(three, t0)
	p.Observe(four, t0)
	reg := NewRegistry()
	old, _, err := Compile(three, reg, testHost(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cur, _, err := Compile(four, reg, testHost(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cur.VIPs[0].Previous, _ = p.For(&four.VIPs[0], t0)
	so, err := dataplane.NewSnapshot(old)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := dataplane.NewSnapshot(cur)
	if err != nil {
		t.Fatal(err)
	}
	addr := map[uint32]netip.Addr{}
	for _, b := range old.VIPs[0].Backends {
		addr[b.Ref] = b.Addr
	}
	vip := netip.MustParseAddr("198.18.0.101")
	moved := 0
	for i := 0; i < 2000; i++ {
		c := netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, 2, byte(i)}), uint16(20000+i))
		ref, ok := so.Where(vip, 6, 80, c)
		prev, ok2 := sc.WherePrevious(vip, 6, 80, c)
		if !ok || !ok2 || prev != addr[ref] {
			t.Fatalf("flow %v: old table %v, previous table %v", c, addr[ref], prev)
		}
		if now, _ := sc.Where(vip, 6, 80, c); now != ref {
			moved++
		}
	}
	t.Logf("%d of 2000 flows changed backend", moved)
}
