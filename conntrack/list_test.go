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
