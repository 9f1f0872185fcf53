package conntrack

import "testing"

// listAll runs List to completion (or until most) in steps of n buckets,
// into chunks of 16 flows.
func listAll(s *Shard, n, most int, keep func(*Flow) bool) []Flow {
	var all []Flow
	chunk, next := s.List(make([]Flow, 0, 16), 0, n, keep)
	for {
		if next == 0 || len(all)+len(chunk) >= most || cap(chunk)-len(chunk) < 8 {
			all = append(all, chunk...)
			chunk = make([]Flow, 0, 16)
		}
		if next == 0 || len(all) >= most {
			return all[:min(len(all), most)]
		}
		chunk, next = s.List(chunk, next, n, keep)
	}
}

func TestList(t *testing.T) {
	s := newShard(t, 4096)
	const flows = 1000
	for i := range flows {
		insert(t, s, testKey(i), uint32(i%5), tcpSYN, Inserted)
	}
	tests := []struct {
		name   string
		step   int
		most   int
		keep   func(*Flow) bool
		want   int
		verify func(*Flow) bool
	}{
		{"all, one step", 1 << 20, 1 << 20, nil, flows, nil},
		{"all, small steps", 3, 1 << 20, nil, flows, nil},
		{"limit", 7, 10, nil, 10, nil},
		{"limit above count", 7, 5000, nil, flows, nil},
		{"backend 3", 16, 1 << 20, func(f *Flow) bool { return f.Backend == 3 }, flows / 5, func(f *Flow) bool { return f.Backend == 3 }},
		{"vip 2, limit 4", 16, 4, func(f *Flow) bool { return f.Key.VIP == 2 }, 4, func(f *Flow) bool { return f.Key.VIP == 2 }},
		{"none", 16, 1 << 20, func(*Flow) bool { return false }, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := listAll(s, tc.step, tc.most, tc.keep)
			if len(got) != tc.want {
				t.Fatalf("listed %d flows, want %d", len(got), tc.want)
			}
			seen := map[Key]bool{}
			for i := range got {
				f := &got[i]
				if seen[f.Key] {
					t.Fatalf("flow %v listed twice", f.Key)
				}
				seen[f.Key] = true
				if f.State != StateSynSent || f.LastSeen != s.Now() {
					t.Errorf("flow %v: state %v seen %d, want %v at %d", f.Key, f.State, f.LastSeen, StateSynSent, s.Now())
				}
				if tc.verify != nil && !tc.verify(f) {
					t.Errorf("flow %+v passed no filter", f)
				}
			}
		})
	}
}

func TestListSkipsExpired(t *testing.T) {
	s := newShard(t, 1024)
	insert(t, s, testKey(1), 1, tcpSYN, Inserted)
	s.Advance(s.Now() + Ticks(testTimeouts.TCPUnestablished) + 1)
	if got := listAll(s, 8, 100, nil); len(got) != 0 {
		t.Fatalf("listed %d timed-out flows", len(got))
	}
}

func TestListNoAllocs(t *testing.T) {
	s := newShard(t, 4096)
	for i := range 500 {
		insert(t, s, testKey(i), 1, tcpSYN, Inserted)
	}
	dst := make([]Flow, 0, 1000)
	if n := testing.AllocsPerRun(10, func() {
		d, next := s.List(dst[:0], 0, 64, nil)
		for next != 0 {
			d, next = s.List(d, next, 64, nil)
		}
	}); n != 0 {
		t.Fatalf("List allocates %v times with room in dst", n)
	}
}

// TestListAge: a listed flow's Age counts ticks from its insertion, not
// from its last packet, and moves with it when Insert relocates it.
func TestListAge(t *testing.T) {
	s := newShard(t, 1024)
	udp := func(n int) Key { k := testKey(n); k.Proto = 17; return k }
	a := insert(t, s, udp(1), 1, 0, Inserted)
	s.Advance(3)
	s.Touch(a, 0)
	insert(t, s, udp(2), 2, 0, Inserted)
	s.Advance(10)
	got := map[uint32]Flow{}
	for _, f := range listAll(s, 1<<20, 1<<20, nil) {
		got[f.Backend] = f
	}
	for _, tc := range []struct {
		backend   uint32
		age, seen Tick
	}{{1, 10, 3}, {2, 7, 3}} {
		f, ok := got[tc.backend]
		if !ok {
			t.Fatalf("flow of backend %d not listed: %v", tc.backend, got)
		}
		if f.Age != tc.age || f.LastSeen != tc.seen {
			t.Errorf("flow of backend %d: age %d last seen %d, want age %d last seen %d", tc.backend, f.Age, f.LastSeen, tc.age, tc.seen)
		}
	}
	// Fill the table at tick 12 until Insert has relocated flows: the first
	// two keep ages 12 and 9 and the rest are 0, whatever bucket a flow
	// was moved to.
	s.Advance(12)
	for i := 3; i < 4096 && s.c.relocations == 0; i++ {
		insert(t, s, udp(i), 9, 0, Inserted)
	}
	if s.c.relocations == 0 {
		t.Fatalf("no flow was relocated: the test proves nothing about moves")
	}
	for _, f := range listAll(s, 1<<20, 1<<20, nil) {
		want := Tick(0)
		switch f.Backend {
		case 1:
			want = 12
		case 2:
			want = 9
		}
		if f.Age != want {
			t.Errorf("flow of backend %d: age %d, want %d", f.Backend, f.Age, want)
		}
	}
}
