package conntrack

import (
	"testing"
	"time"
)

func TestTicks(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want Tick
	}{
		{-time.Second, 0},
		{0, 0},
		{time.Nanosecond, 1},
		{time.Second, 1},
		{1500 * time.Millisecond, 2},
		{time.Hour, 3600},
		{1 << 62, 1<<32 - 1},
	} {
		if got := Ticks(c.d); got != c.want {
			t.Errorf("Ticks(%v) = %d, want %d", c.d, got, c.want)
		}
	}
}

// TestStateMachine walks each documented transition: proto and the flags
// of the first packet, then the flags of later packets.
func TestStateMachine(t *testing.T) {
	const (
		syn    = tcpSYN
		synack = tcpSYN | tcpACK
		ack    = tcpACK
		fin    = tcpFIN | tcpACK
		rst    = tcpRST
	)
	for _, c := range []struct {
		name  string
		proto uint8
		first uint8
		later []uint8
		want  []State // after the first packet, then after each later one
	}{
		{"handshake", protoTCP, syn, []uint8{ack, ack}, []State{StateSynSent, StateEstablished, StateEstablished}},
		{"syn retransmits", protoTCP, syn, []uint8{syn, syn, ack}, []State{StateSynSent, StateSynSent, StateSynSent, StateEstablished}},
		{"synack counts as other", protoTCP, syn, []uint8{synack}, []State{StateSynSent, StateEstablished}},
		{"mid-stream pickup", protoTCP, ack, []uint8{ack}, []State{StateSynSent, StateEstablished}},
		{"fin closes", protoTCP, syn, []uint8{ack, fin, ack}, []State{StateSynSent, StateEstablished, StateClosing, StateClosing}},
		{"rst closes unestablished", protoTCP, syn, []uint8{rst}, []State{StateSynSent, StateClosing}},
		{"first packet rst", protoTCP, rst, nil, []State{StateClosing}},
		{"first packet fin", protoTCP, fin, nil, []State{StateClosing}},
		{"syn on established ignored", protoTCP, syn, []uint8{ack, syn}, []State{StateSynSent, StateEstablished, StateEstablished}},
		{"tuple reuse after close", protoTCP, syn, []uint8{ack, rst, syn, ack}, []State{StateSynSent, StateEstablished, StateClosing, StateSynSent, StateEstablished}},
		{"udp", 17, 0, []uint8{0, 0}, []State{StateUDPNew, StateUDP, StateUDP}},
		{"udp ignores flags", 17, tcpRST, []uint8{tcpFIN}, []State{StateUDPNew, StateUDP}},
		{"icmp like udp", 1, 0, []uint8{0}, []State{StateUDPNew, StateUDP}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newShard(t, 16)
			k := testKey(1)
			k.Proto = c.proto
			e := insert(t, s, k, 7, c.first, Inserted)
			if got := e.State(); got != c.want[0] {
				t.Fatalf("after first packet: %v, want %v", got, c.want[0])
			}
			for j, f := range c.later {
				s.Touch(e, f)
				if got := e.State(); got != c.want[j+1] {
					t.Fatalf("after packet %d (flags %#x): %v, want %v", j+2, f, got, c.want[j+1])
				}
			}
		})
	}
}

func TestEvictable(t *testing.T) {
	for st, want := range map[State]bool{
		StateSynSent: true, StateUDPNew: true,
		StateEstablished: false, StateClosing: false, StateUDP: false,
	} {
		if got := st.Evictable(); got != want {
			t.Errorf("%v.Evictable() = %v, want %v", st, got, want)
		}
	}
}

// TestTimeouts checks, with a fake clock, that a flow in each state lives
// exactly its state's timeout after its last packet, then misses; and that
// the expiry scan reclaims it without any lookup.
func TestTimeouts(t *testing.T) {
	for _, c := range []struct {
		name    string
		proto   uint8
		packets []uint8 // flags: first creates, the rest Touch
		state   State
		timeout time.Duration
	}{
		{"syn sent", protoTCP, []uint8{tcpSYN}, StateSynSent, testTimeouts.TCPUnestablished},
		{"established", protoTCP, []uint8{tcpSYN, tcpACK}, StateEstablished, testTimeouts.TCPEstablished},
		{"closing", protoTCP, []uint8{tcpSYN, tcpACK, tcpFIN}, StateClosing, testTimeouts.TCPClosing},
		{"udp new", 17, []uint8{0}, StateUDPNew, testTimeouts.UDP},
		{"udp", 17, []uint8{0, 0}, StateUDP, testTimeouts.UDP},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newShard(t, 16)
			s.Advance(1000)
			k := testKey(3)
			k.Proto = c.proto
			e := insert(t, s, k, 9, c.packets[0], Inserted)
			for _, f := range c.packets[1:] {
				s.Advance(s.Now() + 1)
				s.Touch(e, f)
			}
			if e.State() != c.state {
				t.Fatalf("state %v, want %v", e.State(), c.state)
			}
			last := s.Now()
			if e.LastSeen() != last {
				t.Fatalf("LastSeen %d, want %d", e.LastSeen(), last)
			}

			s.Advance(last + Ticks(c.timeout))
			if _, ok := lookup(s, k); !ok {
				t.Fatalf("miss %v after exactly the timeout", c.timeout)
			}
			s.Advance(last + Ticks(c.timeout) + 1)
			if _, ok := lookup(s, k); ok {
				t.Fatalf("hit one tick past the timeout %v", c.timeout)
			}
			if st := s.Stats(); st.Expirations != 1 || st.Entries != 0 {
				t.Fatalf("after expiry: %+v", st)
			}

			// Same again, reclaimed by Advance alone (two buckets, 8 per call).
			insert(t, s, k, 9, c.packets[0], Inserted)
			s.Advance(s.Now() + Ticks(c.timeout) + 1)
			if st := s.Stats(); st.Expirations != 2 || st.Entries != 0 {
				t.Fatalf("expiry scan did not reclaim: %+v", st)
			}
			checkInvariants(t, s)
		})
	}
}

// A backwards clock is ignored: time never runs back for entries.
func TestAdvanceMonotonic(t *testing.T) {
	s := newShard(t, 16)
	s.Advance(50)
	s.Advance(10)
	if s.Now() != 50 {
		t.Fatalf("Now = %d after a backwards Advance, want 50", s.Now())
	}
}
