package control

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/dataplane"
)

// twoVIPs is the configuration the tests share: NAT VIP "a" (two
// backends, one of weight 2) and DSR VIP "b" (two, one draining).
var twoVIPs = fixture("two-vips.toml")

// fixture returns the file testdata/name (a package-level variable's
// value, so it panics rather than fail a test).
func fixture(name string) string {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		panic(err)
	}
	return string(b)
}

func load(t *testing.T, src string) *config.Config {
	t.Helper()
	cfg, _, err := config.Parse("t.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func testHost() *Host {
	return &Host{
		Host: dataplane.Host{
			MAC:   [2][6]byte{{2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2}},
			MTU:   [2]int{1500, 1500},
			Addr4: [2]netip.Addr{netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.1.1")},
		},
		NextHop: func(a netip.Addr) ([6]byte, bool) {
			b := a.As4()
			return [6]byte{2, 0, 0, 0, 1, b[3]}, true
		},
	}
}

func TestCompile(t *testing.T) {
	reg := NewRegistry()
	spec, allDown, err := Compile(load(t, twoVIPs), reg, testHost(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(allDown) != 0 {
		t.Errorf("all down: %v", allDown)
	}
	if _, err := dataplane.NewSnapshot(spec); err != nil {
		t.Fatalf("the compiled spec does not build: %v", err)
	}
	if !spec.TwoArmed || len(spec.VIPs) != 2 {
		t.Fatalf("spec: two-armed %v, %d VIPs", spec.TwoArmed, len(spec.VIPs))
	}
	a, b := spec.VIPs[0], spec.VIPs[1]
	if a.ID == b.ID || a.ID == 0 || b.ID == 0 {
		t.Errorf("VIP IDs %d and %d", a.ID, b.ID)
	}
	if a.Backends[0].Weight != 2*weightScale || a.Backends[0].Port != 8080 || a.Backends[0].MAC != [6]byte{2, 0, 0, 0, 1, 11} {
		t.Errorf("backend 0: %+v", a.Backends[0])
	}
	if b.Mode != dataplane.ModeDSR || b.EncapSrc != netip.MustParseAddr("198.18.1.1") {
		t.Errorf("DSR VIP without the egress address as default encap source: %+v", b)
	}
	if b.Backends[1].State != dataplane.BackendDraining {
		t.Errorf("configured draining backend is %v", b.Backends[1].State)
	}
	if a.Backends[0].Ref == b.Backends[0].Ref {
		t.Errorf("the same address in two VIPs must be two backends (refs %d)", a.Backends[0].Ref)
	}
}

// TestReloadKeepsIdentities: a reload that reorders VIPs and backends, adds
// and removes some, keeps the ID and ref of everything that stays.
func TestReloadKeepsIdentities(t *testing.T) {
	reg := NewRegistry()
	s1, _, err := Compile(load(t, twoVIPs), reg, testHost(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// VIP b first, a's backends swapped and one added, b's draining one gone.
	reloaded := `
[dataplane]
ingress = "eth0"
egress = "eth1"
[[vip]]
name = "b"
address = "198.18.0.101"
port = 80
mode = "dsr"
[[vip.backend]]
address = "198.18.1.11"
[[vip]]
name = "a-renamed"
address = "198.18.0.100"
port = 80
[[vip.backend]]
address = "198.18.1.14"
port = 8080
[[vip.backend]]
address = "198.18.1.12"
port = 8080
[[vip.backend]]
address = "198.18.1.11"
port = 8080
weight = 2
`
	s2, _, err := Compile(load(t, reloaded), reg, testHost(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s2.VIPs[1].ID != s1.VIPs[0].ID || s2.VIPs[0].ID != s1.VIPs[1].ID {
		t.Errorf("VIP IDs changed across reload: %d,%d then %d,%d", s1.VIPs[0].ID, s1.VIPs[1].ID, s2.VIPs[0].ID, s2.VIPs[1].ID)
	}
	refs := map[uint32]bool{}
	for _, v := range s1.VIPs {
		for _, b := range v.Backends {
			refs[b.Ref] = true
		}
	}
	if s2.VIPs[1].Backends[2].Ref != s1.VIPs[0].Backends[0].Ref || s2.VIPs[1].Backends[1].Ref != s1.VIPs[0].Backends[1].Ref {
		t.Errorf("backend refs changed across reload")
	}
	if refs[s2.VIPs[1].Backends[0].Ref] {
		t.Errorf("a new backend got an old reference %d", s2.VIPs[1].Backends[0].Ref)
	}
}

func TestStatus(t *testing.T) {
	reg := NewRegistry()
	cfg := load(t, twoVIPs)
	s0, _, _ := Compile(cfg, reg, testHost(), nil)
	r0, r1 := s0.VIPs[0].Backends[0].Ref, s0.VIPs[0].Backends[1].Ref
	tests := []struct {
		name    string
		status  map[uint32]Status
		want    [2]dataplane.BackendState
		weights [2]uint32
		allDown bool
	}{
		{"healthy", nil, [2]dataplane.BackendState{dataplane.BackendUp, dataplane.BackendUp}, [2]uint32{2000, 1000}, false},
		{"one down", map[uint32]Status{r0: {Down: true}}, [2]dataplane.BackendState{dataplane.BackendDown, dataplane.BackendUp}, [2]uint32{2000, 1000}, false},
		{"drained by the admin", map[uint32]Status{r1: {Draining: true}}, [2]dataplane.BackendState{dataplane.BackendUp, dataplane.BackendDraining}, [2]uint32{2000, 1000}, false},
		{"slow start", map[uint32]Status{r0: {Ramp: 0.25}}, [2]dataplane.BackendState{dataplane.BackendUp, dataplane.BackendUp}, [2]uint32{500, 1000}, false},
		{"slow start at the very start", map[uint32]Status{r0: {Ramp: 1e-9}}, [2]dataplane.BackendState{dataplane.BackendUp, dataplane.BackendUp}, [2]uint32{1, 1000}, false},
		{"all down, ignore_health", map[uint32]Status{r0: {Down: true}, r1: {Down: true}}, [2]dataplane.BackendState{dataplane.BackendUp, dataplane.BackendUp}, [2]uint32{2000, 1000}, true},
		// Drained on purpose, by the admin API or drain_status: no panic,
		// no all-down event; panic mode used to put them back to work.
		{"all drained", map[uint32]Status{r0: {Draining: true}, r1: {Draining: true}}, [2]dataplane.BackendState{dataplane.BackendDraining, dataplane.BackendDraining}, [2]uint32{2000, 1000}, false},
		{"one down, one drained", map[uint32]Status{r0: {Down: true}, r1: {Draining: true}}, [2]dataplane.BackendState{dataplane.BackendDown, dataplane.BackendDraining}, [2]uint32{2000, 1000}, false},
		// Run-time overrides (vipd weight, vipd disable) apply as though
		// the file said them, slow start included.
		{"weight override", map[uint32]Status{r1: {Weight: 5}}, [2]dataplane.BackendState{dataplane.BackendUp, dataplane.BackendUp}, [2]uint32{2000, 5000}, false},
		{"weight override, slow start", map[uint32]Status{r1: {Weight: 4, Ramp: 0.5}}, [2]dataplane.BackendState{dataplane.BackendUp, dataplane.BackendUp}, [2]uint32{2000, 2000}, false},
		{"disabled", map[uint32]Status{r0: {Disabled: true}}, [2]dataplane.BackendState{dataplane.BackendDown, dataplane.BackendUp}, [2]uint32{2000, 1000}, false},
		// Panic mode puts the backends the operator enabled back to work,
		// at the weight in force; not one the operator disabled.
		{"all down, ignore_health, one disabled", map[uint32]Status{r0: {Down: true, Disabled: true}, r1: {Down: true, Weight: 3}}, [2]dataplane.BackendState{dataplane.BackendDown, dataplane.BackendUp}, [2]uint32{2000, 3000}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, allDown, err := Compile(cfg, reg, testHost(), tt.status)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2; i++ {
				b := spec.VIPs[0].Backends[i]
				if b.State != tt.want[i] || b.Weight != tt.weights[i] {
					t.Errorf("backend %d: state %v weight %d, want %v %d", i, b.State, b.Weight, tt.want[i], tt.weights[i])
				}
			}
			if (len(allDown) == 1 && allDown[0] == "a") != tt.allDown {
				t.Errorf("all down reported %v", allDown)
			}
		})
	}
	// on_all_down = "drop" (VIP b): both down stay down.
	rb0, rb1 := s0.VIPs[1].Backends[0].Ref, s0.VIPs[1].Backends[1].Ref
	spec, allDown, _ := Compile(cfg, reg, testHost(), map[uint32]Status{rb0: {Down: true}, rb1: {Down: true}})
	if spec.VIPs[1].Backends[0].State != dataplane.BackendDown || len(allDown) != 1 || allDown[0] != "b" {
		t.Errorf("drop mode: state %v, all down %v", spec.VIPs[1].Backends[0].State, allDown)
	}
}

func TestEncapSourceMissing(t *testing.T) {
	h := testHost()
	h.Addr4[1] = netip.Addr{}
	_, _, err := Compile(load(t, twoVIPs), NewRegistry(), h, nil)
	if err == nil || !strings.Contains(err.Error(), "encap_source") {
		t.Errorf("want an error naming encap_source, got %v", err)
	}
}

func TestRegistryReuse(t *testing.T) {
	r := NewRegistry()
	a, _ := r.VIPID("a")
	b, _ := r.VIPID("b")
	if a2, _ := r.VIPID("a"); a2 != a || a == b {
		t.Fatalf("ids %d %d %d", a, a2, b)
	}
	r.Forget(map[string]bool{"b": true}, nil)
	if c, _ := r.VIPID("c"); c == a {
		t.Errorf("a freed ID was reused before the space ran out")
	}
}

// TestCompileEncap: encap, gue_port and encap_source_prefix reach the
// VIP's spec, and a prefix without encap_source supplies the source.
func TestCompileEncap(t *testing.T) {
	for _, tc := range []struct {
		name, keys string
		want       dataplane.VIPSpec // Encap, GUEPort, EncapSrc, EncapSrcPrefix
	}{
		{"default", "", dataplane.VIPSpec{Encap: dataplane.EncapIPIP, EncapSrc: netip.MustParseAddr("198.18.1.1")}},
		{"gue", "encap = \"gue\"\n", dataplane.VIPSpec{Encap: dataplane.EncapGUE, GUEPort: 6080, EncapSrc: netip.MustParseAddr("198.18.1.1")}},
		{"gue port", "encap = \"gue\"\ngue_port = 7777\n", dataplane.VIPSpec{Encap: dataplane.EncapGUE, GUEPort: 7777, EncapSrc: netip.MustParseAddr("198.18.1.1")}},
		{"prefix", "encap_source_prefix = \"198.18.4.0/24\"\n", dataplane.VIPSpec{EncapSrc: netip.MustParseAddr("198.18.4.0"), EncapSrcPrefix: netip.MustParsePrefix("198.18.4.0/24")}},
		{"prefix and source", "encap_source = \"198.18.4.9\"\nencap_source_prefix = \"198.18.4.0/24\"\n", dataplane.VIPSpec{EncapSrc: netip.MustParseAddr("198.18.4.9"), EncapSrcPrefix: netip.MustParsePrefix("198.18.4.0/24")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(twoVIPs, "mode = \"dsr\"\n", "mode = \"dsr\"\n"+tc.keys, 1)
			spec, _, err := Compile(load(t, src), NewRegistry(), testHost(), nil)
			if err != nil {
				t.Fatal(err)
			}
			got := spec.VIPs[1]
			if got.Encap != tc.want.Encap || got.GUEPort != tc.want.GUEPort || got.EncapSrc != tc.want.EncapSrc || got.EncapSrcPrefix != tc.want.EncapSrcPrefix {
				t.Errorf("encap %v port %d source %v prefix %v; want %v %d %v %v", got.Encap, got.GUEPort, got.EncapSrc, got.EncapSrcPrefix,
					tc.want.Encap, tc.want.GUEPort, tc.want.EncapSrc, tc.want.EncapSrcPrefix)
			}
			if _, err := dataplane.NewSnapshot(spec); err != nil {
				t.Errorf("the spec does not build: %v", err)
			}
		})
	}
}
