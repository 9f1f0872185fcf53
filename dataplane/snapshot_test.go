package dataplane

import (
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"testing"
)

// randSpec returns a valid random spec: IPv4 and IPv6 VIPs, NAT and DSR,
// small prime tables, backends in every state with random weights, MACs
// and epochs. Refs are unique and leave gaps.
func randSpec(r *rand.Rand) *Spec {
	spec := &Spec{
		Seed:     r.Uint64(),
		TwoArmed: true,
		Host: Host{
			MAC:            [2][6]byte{{2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2}},
			Addr4:          [2]netip.Addr{netip.MustParseAddr("198.18.0.254"), netip.MustParseAddr("198.18.1.1")},
			Addr6:          [2]netip.Addr{netip.MustParseAddr("2001:db8::fe"), netip.MustParseAddr("2001:db8:1::1")},
			ClientGateway4: [6]byte{2, 0, 0, 0, 0, 9},
			Local:          []netip.Addr{netip.MustParseAddr("198.18.9.9")},
		},
	}
	ref := uint32(1)
	for i := 0; i < 1+r.IntN(8); i++ {
		spec.VIPs = append(spec.VIPs, randVIP(r, uint16(i+1), &ref))
	}
	return spec
}

var tableSizes = []uint32{31, 251, 509, 1021}

// randVIP returns a VIP with ID id (its address follows from it) whose
// backends take refs from *ref on.
func randVIP(r *rand.Rand, id uint16, ref *uint32) VIPSpec {
	v6 := r.IntN(3) == 0
	vs := VIPSpec{ID: id, Name: "v" + string(rune('a'+id%26)), Port: 80, Proto: 6, TableSize: tableSizes[r.IntN(len(tableSizes))], SrcHash: r.IntN(4) == 0}
	if r.IntN(2) == 0 {
		vs.Proto = 17
	}
	if v6 {
		vs.Addr = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 2, 14: byte(id >> 8), 15: byte(id)})
	} else {
		vs.Addr = netip.AddrFrom4([4]byte{198, 18, 2, byte(id)})
	}
	if r.IntN(3) == 0 {
		vs.Mode = ModeDSR
		vs.EncapSrc = netip.MustParseAddr("198.18.1.1")
		if v6 {
			vs.EncapSrc = netip.MustParseAddr("2001:db8:1::1")
		}
	}
	for j := 0; j < r.IntN(9); j++ {
		vs.Backends = append(vs.Backends, randBackend(r, v6, id, j, ref))
	}
	return vs
}

func randBackend(r *rand.Rand, v6 bool, id uint16, j int, ref *uint32) BackendSpec {
	*ref += uint32(1 + r.IntN(3))
	b := BackendSpec{Ref: *ref, Port: uint16(8000 + j), Weight: uint32(r.IntN(4)) * 1000, State: BackendState(r.IntN(3)), Epoch: uint32(r.IntN(3))}
	if r.IntN(5) > 0 {
		b.MAC = [6]byte{2, 0, 0, 1, byte(id), byte(j)}
	}
	if v6 {
		b.Addr = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 3, 14: byte(id), 15: byte(j + 1)})
	} else {
		b.Addr = netip.AddrFrom4([4]byte{198, 19, byte(id), byte(j + 1)})
	}
	return b
}

// change returns spec with one random change, as the daemon makes them: a
// new Spec and VIPs slice, the Backends of an untouched VIP shared, those
// of a changed one copied (or, with deep, every VIP's copied, as a reload
// compiles them anew). It names the change.
func change(r *rand.Rand, spec *Spec, deep bool) (*Spec, string) {
	n := *spec
	n.VIPs = slices.Clone(spec.VIPs)
	if deep {
		for i := range n.VIPs {
			n.VIPs[i].Backends = slices.Clone(n.VIPs[i].Backends)
		}
	}
	maxRef := uint32(0)
	for _, v := range n.VIPs {
		for _, b := range v.Backends {
			maxRef = max(maxRef, b.Ref)
		}
	}
	vi := r.IntN(len(n.VIPs))
	v := &n.VIPs[vi]
	bs := slices.Clone(v.Backends)
	v.Backends = bs
	kinds := []string{"nothing", "state", "weight", "mac", "epoch", "backend port", "remove backend", "add backend", "reuse ref",
		"move ref", "table size", "port", "srchash", "name", "local", "gateway", "remove vip", "add vip", "swap vips", "box mac", "arms"}
	kind := kinds[r.IntN(len(kinds))]
	if len(bs) == 0 && kind != "add backend" && kind != "nothing" && kind != "table size" && kind != "port" &&
		kind != "local" && kind != "gateway" && kind != "box mac" && kind != "arms" && kind != "add vip" && kind != "swap vips" && kind != "remove vip" && kind != "name" && kind != "srchash" {
		kind = "add backend"
	}
	j := 0
	if len(bs) > 0 {
		j = r.IntN(len(bs))
	}
	switch kind {
	case "nothing":
		if !deep {
			return spec, kind // the very same spec
		}
	case "state":
		bs[j].State = (bs[j].State + BackendState(1+r.IntN(2))) % 3
	case "weight":
		bs[j].Weight = uint32(1+r.IntN(1000)) * 7
	case "mac":
		bs[j].MAC[5]++
	case "epoch":
		bs[j].Epoch++
	case "backend port":
		bs[j].Port += 100
	case "remove backend":
		v.Backends = slices.Delete(bs, j, j+1)
	case "add backend":
		ref := maxRef
		v.Backends = append(bs, randBackend(r, v.Addr.Is6(), v.ID, 20+len(bs), &ref))
	case "reuse ref":
		// The backend is replaced by another that takes over its ref
		// under a new epoch, as the registry does after refHold.
		ref := bs[j].Ref - 1
		nb := randBackend(r, v.Addr.Is6(), v.ID, 40+j, &ref)
		nb.Epoch = bs[j].Epoch + 1
		bs[j] = nb
	case "move ref":
		// The backend leaves its VIP; another VIP's new backend takes
		// its ref.
		ref := bs[j].Ref
		v.Backends = slices.Delete(bs, j, j+1)
		wi := r.IntN(len(n.VIPs))
		w := &n.VIPs[wi]
		w.Backends = slices.Clone(w.Backends)
		ref--
		nb := randBackend(r, w.Addr.Is6(), w.ID, 60+len(w.Backends), &ref)
		nb.Ref = bs[j].Ref
		_ = ref
		w.Backends = append(w.Backends, nb)
	case "table size":
		v.TableSize = tableSizes[(slices.Index(tableSizes, v.TableSize)+1)%len(tableSizes)]
	case "port":
		v.Port++
	case "srchash":
		v.SrcHash = !v.SrcHash
	case "name":
		v.Name += "x"
	case "local":
		n.Local = append(slices.Clone(spec.Local), netip.AddrFrom4([4]byte{198, 18, 9, byte(10 + r.IntN(200))}))
	case "gateway":
		n.ClientGateway4[5]++
		n.Neighbors = map[netip.Addr][6]byte{netip.MustParseAddr("198.18.0.7"): {2, 9, 9, 9, 9, 9}}
	case "remove vip":
		if len(n.VIPs) > 1 {
			n.VIPs = slices.Delete(n.VIPs, vi, vi+1)
		}
	case "add vip":
		id := uint16(0)
		for _, w := range n.VIPs {
			id = max(id, w.ID)
		}
		ref := maxRef
		n.VIPs = append(n.VIPs, randVIP(r, id+1, &ref))
	case "swap vips":
		k := r.IntN(len(n.VIPs))
		n.VIPs[vi], n.VIPs[k] = n.VIPs[k], n.VIPs[vi]
	case "box mac": // a port's MAC, which frames to backends carry
		n.MAC[r.IntN(2)][5]++
	case "arms": // the egress port, whose MAC frames to backends carry
		n.TwoArmed = !n.TwoArmed
	}
	return &n, kind
}

// visible returns a copy of s with only what workers and Where read: the
// fields NewSnapshotFrom keeps for the next build are cleared.
func visible(s *Snapshot) Snapshot {
	c := *s
	c.build, c.byID, c.spares, c.steady = nil, nil, nil, false
	return c
}

// TestSnapshotFromMatchesScratch applies random single changes to random
// specs, each built incrementally from the previous snapshot in a chain,
// and checks every result against a snapshot built from scratch: the same
// fields (Maglev tables, classifiers, backend array and epochs included),
// the same Maglev picks over many hashes, and SteeringUnchanged only when
// the steering sets are indeed the previous ones.
func TestSnapshotFromMatchesScratch(t *testing.T) {
	tests := []struct {
		name  string
		deep  bool // every VIP's Backends copied, as a reload compiles them
		seeds int
	}{
		{"shared backends", false, 40},
		{"copied backends", true, 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for seed := 0; seed < tt.seeds; seed++ {
				r := rand.New(rand.NewPCG(uint64(seed), 13))
				spec := randSpec(r)
				prev, err := NewSnapshot(spec)
				if err != nil {
					t.Fatalf("seed %d: random spec: %v", seed, err)
				}
				for step := 0; step < 30; step++ {
					next, kind := change(r, spec, tt.deep)
					got, gerr := NewSnapshotFrom(prev, next)
					want, werr := NewSnapshot(next)
					if (gerr != nil) != (werr != nil) {
						t.Fatalf("seed %d step %d (%s): incremental error %v, from scratch %v", seed, step, kind, gerr, werr)
					}
					if werr != nil {
						continue // the daemon keeps prev: so does the chain
					}
					// The generation moves exactly when the state of the
					// established flows does: never for what only picks
					// new flows' backends, always for what changes how
					// their packets are forwarded, and alike whether the
					// snapshot was built from its predecessor or anew.
					wantGen := prev.gen + 1
					if got.fastState == prev.fastState {
						wantGen = prev.gen
					}
					if got.gen != wantGen || want.gen != 1 || got.fastState != want.fastState {
						t.Fatalf("seed %d step %d (%s): generation %d after %d, from scratch %d; state %#x, from scratch %#x",
							seed, step, kind, got.gen, prev.gen, want.gen, got.fastState, want.fastState)
					}
					switch same := got.fastState == prev.fastState; kind {
					case "nothing", "weight", "table size", "name":
						if !same {
							t.Fatalf("seed %d step %d: a %q change moved the fast path's generation", seed, step, kind)
						}
					case "state", "remove vip", "swap vips":
						// Up ↔ draining keeps the flows, down does not; a
						// lone VIP is not removed; a swap may swap a VIP
						// with itself.
					default:
						if same {
							t.Fatalf("seed %d step %d: a %q change kept the fast path's generation", seed, step, kind)
						}
					}
					want.gen = got.gen // the one field that tells them apart
					compareSnapshots(t, r, got, want)
					if got.SteeringUnchanged() && !reflect.DeepEqual(next.Steering(), spec.Steering()) {
						t.Fatalf("seed %d step %d (%s): SteeringUnchanged, but the steering sets differ", seed, step, kind)
					}
					if t.Failed() {
						t.Fatalf("seed %d step %d (%s)", seed, step, kind)
					}
					spec, prev = next, got
				}
			}
		})
	}
}

func compareSnapshots(t *testing.T, r *rand.Rand, got, want *Snapshot) {
	t.Helper()
	for i := range want.vips {
		g, w := &got.vips[i], &want.vips[i]
		if g.table.Size() != w.table.Size() {
			t.Errorf("VIP %d: table size %d, want %d", w.id, g.table.Size(), w.table.Size())
			continue
		}
		for k := 0; k < 2000; k++ {
			h := r.Uint64()
			gi, wi := g.table.Lookup(h), w.table.Lookup(h)
			if gi != wi || (wi >= 0 && g.refs[gi] != w.refs[wi]) {
				t.Errorf("VIP %d: hash %#x picks %d, want %d", w.id, h, gi, wi)
				break
			}
		}
	}
	if gv, wv := visible(got), visible(want); !reflect.DeepEqual(gv, wv) {
		t.Errorf("incremental snapshot differs from scratch:\n got %+v\nwant %+v", gv, wv)
	}
}

// TestSnapshotReusesTables checks what makes a health event cheap: a
// change to one VIP's backend keeps every other VIP's Maglev table, the
// classifiers and the steering; the changed VIP's former table comes back
// when the backend does.
func TestSnapshotReusesTables(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	spec := randSpec(r)
	for len(spec.VIPs) < 3 || len(spec.VIPs[0].Backends) < 2 {
		spec = randSpec(r)
	}
	for j := range spec.VIPs[0].Backends {
		spec.VIPs[0].Backends[j].State, spec.VIPs[0].Backends[j].Weight = BackendUp, 1000
	}
	s0, err := NewSnapshot(spec)
	if err != nil {
		t.Fatal(err)
	}
	flap := func(prev *Snapshot, spec *Spec, st BackendState) (*Snapshot, *Spec) {
		n := *spec
		n.VIPs = slices.Clone(spec.VIPs)
		n.VIPs[0].Backends = slices.Clone(n.VIPs[0].Backends)
		n.VIPs[0].Backends[0].State = st
		s, err := NewSnapshotFrom(prev, &n)
		if err != nil {
			t.Fatal(err)
		}
		return s, &n
	}
	s1, spec1 := flap(s0, spec, BackendDown)
	tests := []struct {
		name string
		ok   bool
	}{
		{"changed VIP gets a new table", s1.vips[0].table != s0.vips[0].table},
		{"classifiers kept", &s1.cls4.exact4.slots[0] == &s0.cls4.exact4.slots[0]},
		{"steering unchanged", s1.SteeringUnchanged()},
	}
	for i := 1; i < len(spec.VIPs); i++ {
		tests = append(tests, struct {
			name string
			ok   bool
		}{"other VIP keeps its table", s1.vips[i].table == s0.vips[i].table})
	}
	s2, _ := flap(s1, spec1, BackendUp)
	tests = append(tests, struct {
		name string
		ok   bool
	}{"flap back reuses the former table", s2.vips[0].table == s0.vips[0].table})
	for _, tt := range tests {
		if !tt.ok {
			t.Errorf("%s: no", tt.name)
		}
	}
}

// TestSyncCounters: a worker's counters of a ref restart when the ref
// names another backend (a new epoch), and only then.
func TestSyncCounters(t *testing.T) {
	mk := func(epochs ...uint32) *Snapshot {
		return &Snapshot{backends: make([]backend, len(epochs)), epochs: epochs}
	}
	c := []FlowCounters{{Packets: 1}, {Packets: 2}}
	var e []uint32
	c, e = mk(0, 1).syncCounters(c, e)
	c[1].Packets = 5 // counted under epoch 1
	tests := []struct {
		name   string
		snap   *Snapshot
		ref    int
		before uint64 // packets of ref before the sync
		want   uint64
	}{
		{"same epoch keeps", mk(0, 1), 1, 5, 5},
		{"hole keeps", mk(0, 0), 1, 5, 5},
		{"back under the same epoch keeps", mk(0, 1), 1, 5, 5},
		{"new epoch restarts", mk(0, 2), 1, 5, 0},
		{"grows", mk(0, 2, 1), 2, 0, 0},
	}
	for _, tt := range tests {
		if tt.ref < len(c) {
			c[tt.ref].Packets = tt.before
		}
		c, e = tt.snap.syncCounters(c, e)
		if len(c) < len(tt.snap.backends) || c[tt.ref].Packets != tt.want {
			t.Errorf("%s: %d counters, ref %d has %d packets, want %d", tt.name, len(c), tt.ref, c[tt.ref].Packets, tt.want)
		}
	}
}
