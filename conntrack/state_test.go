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

// pkt is one packet of a state machine test: its TCP flags, how many
// ticks pass before it, and the state and proof level it must leave.
type pkt struct {
	flags uint8
	dt    Tick
	state State
	level int
}

// TestStateMachine walks each documented transition: proto and the flags
// of the first packet, then later packets, each in the same tick as the
// one before (dt 0) or later.
func TestStateMachine(t *testing.T) {
	const (
		syn    = tcpSYN
		synack = tcpSYN | tcpACK
		ack    = tcpACK
		fin    = tcpFIN | tcpACK
		rst    = tcpRST
		P      = ProofTicks
	)
	const (
		Syn = StateSynSent
		Unc = StateUnconfirmed
		Est = StateEstablished
		Clo = StateClosing
		New = StateUDPNew
		UDP = StateUDP
	)
	for _, c := range []struct {
		name  string
		proto uint8
		pkts  []pkt // the first creates the flow
	}{
		{"handshake then a transfer, one packet a tick", protoTCP, []pkt{
			{syn, 0, Syn, 0}, {ack, 0, Unc, 1}, {ack, 1, Unc, 2}, {ack, 1, Est, P}, {ack, 1, Est, P}}},
		{"spoofed syn then ack: never past level 1", protoTCP, []pkt{
			{syn, 0, Syn, 0}, {ack, 0, Unc, 1}}},
		{"syn and ack in two ticks count once", protoTCP, []pkt{
			{syn, 0, Syn, 0}, {ack, 1, Unc, 1}, {ack, 0, Unc, 1}}},
		{"many packets in one tick prove nothing", protoTCP, []pkt{
			{syn, 0, Syn, 0}, {ack, 0, Unc, 1}, {ack, 0, Unc, 1}, {ack, 0, Unc, 1}, {ack, 0, Unc, 1}}},
		{"gaps count as one tick each", protoTCP, []pkt{
			{syn, 0, Syn, 0}, {ack, 0, Unc, 1}, {ack, 7, Unc, 2}, {ack, 0, Unc, 2}, {ack, 5, Est, P}}},
		{"syn retransmits", protoTCP, []pkt{
			{syn, 0, Syn, 0}, {syn, 1, Syn, 0}, {syn, 2, Syn, 0}, {ack, 4, Unc, 1}}},
		{"synack counts as other", protoTCP, []pkt{
			{syn, 0, Syn, 0}, {synack, 0, Unc, 1}, {synack, 1, Unc, 2}}},
		{"syn on unconfirmed: no progress", protoTCP, []pkt{
			{syn, 0, Syn, 0}, {ack, 0, Unc, 1}, {syn, 1, Unc, 1}, {ack, 1, Unc, 2}}},
		{"mid-stream pickup counts its first packet", protoTCP, []pkt{
			{ack, 0, Unc, 1}, {ack, 0, Unc, 1}, {ack, 1, Unc, 2}, {ack, 1, Est, P}}},
		{"synack first is mid-stream too", protoTCP, []pkt{{synack, 0, Unc, 1}}},
		{"fin closes established, keeps its proof", protoTCP, []pkt{
			{syn, 0, Syn, 0}, {ack, 0, Unc, 1}, {ack, 1, Unc, 2}, {ack, 1, Est, P}, {fin, 0, Clo, P}, {ack, 1, Clo, P}}},
		{"fin closes unconfirmed, keeps its level", protoTCP, []pkt{
			{syn, 0, Syn, 0}, {ack, 0, Unc, 1}, {ack, 1, Unc, 2}, {fin, 1, Clo, 2}, {ack, 1, Clo, 2}}},
		{"rst closes unestablished", protoTCP, []pkt{{syn, 0, Syn, 0}, {rst, 0, Clo, 0}}},
		{"first packet rst", protoTCP, []pkt{{rst, 0, Clo, 0}, {ack, 1, Clo, 0}, {ack, 1, Clo, 0}, {ack, 1, Clo, 0}}},
		{"first packet fin", protoTCP, []pkt{{fin, 0, Clo, 0}}},
		{"syn on established ignored", protoTCP, []pkt{
			{syn, 0, Syn, 0}, {ack, 0, Unc, 1}, {ack, 1, Unc, 2}, {ack, 1, Est, P}, {syn, 1, Est, P}}},
		{"tuple reuse after close starts over", protoTCP, []pkt{
			{syn, 0, Syn, 0}, {ack, 0, Unc, 1}, {ack, 1, Unc, 2}, {ack, 1, Est, P}, {rst, 0, Clo, P}, {syn, 1, Syn, 0}, {ack, 0, Unc, 1}}},
		{"udp, a datagram a tick", 17, []pkt{{0, 0, New, 1}, {0, 1, New, 2}, {0, 1, UDP, P}, {0, 1, UDP, P}}},
		{"udp, a burst in one tick", 17, []pkt{{0, 0, New, 1}, {0, 0, New, 1}, {0, 0, New, 1}}},
		{"udp ignores flags", 17, []pkt{{tcpRST, 0, New, 1}, {tcpFIN, 1, New, 2}, {tcpSYN, 1, UDP, P}}},
		{"icmp like udp", 1, []pkt{{0, 0, New, 1}, {0, 3, New, 2}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newShard(t, 16)
			s.Advance(100)
			k := testKey(1)
			k.Proto = c.proto
			var e Entry
			for j, p := range c.pkts {
				s.Advance(s.Now() + p.dt)
				if j == 0 {
					e = insert(t, s, k, 7, p.flags, Inserted)
				} else {
					s.Touch(e, p.flags)
				}
				if e.State() != p.state || e.Level() != p.level {
					t.Fatalf("after packet %d (flags %#x, +%d ticks): %v level %d, want %v level %d",
						j+1, p.flags, p.dt, e.State(), e.Level(), p.state, p.level)
				}
				if want := p.level < ProofTicks; e.Evictable() != want {
					t.Fatalf("after packet %d: Evictable %v, want %v", j+1, e.Evictable(), want)
				}
				if e.LastSeen() != s.Now() {
					t.Fatalf("after packet %d: LastSeen %d, want %d", j+1, e.LastSeen(), s.Now())
				}
			}
			checkInvariants(t, s)
		})
	}
}

// TestTransitionTable checks the table itself: every reachable phase has a
// row, every row leads to a valid phase, and the level never goes down
// except when a Closing flow's tuple is reused by a new SYN.
func TestTransitionTable(t *testing.T) {
	for ph := range phaseMask + 1 {
		if !validPhase[ph] {
			continue
		}
		for c := range numClasses {
			for later := range 2 {
				to := next[ph][c][later]
				if !validPhase[to] {
					t.Errorf("next[%#x][%d][%d] = %#x, not a valid phase", ph, c, later, to)
					continue
				}
				if to>>levelShift < uint8(ph)>>levelShift && !(State(ph&stateMask) == StateClosing && c == classSYN) {
					t.Errorf("next[%#x][%d][%d] = %#x lowers the proof level", ph, c, later, to)
				}
				if later == 0 && State(ph&stateMask) != StateSynSent && to>>levelShift > uint8(ph)>>levelShift {
					t.Errorf("next[%#x][%d][same tick] = %#x raises the proof level", ph, c, to)
				}
			}
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
		{"unconfirmed", protoTCP, []uint8{tcpSYN, tcpACK}, StateUnconfirmed, testTimeouts.TCPUnconfirmed},
		{"established", protoTCP, []uint8{tcpSYN, tcpACK, tcpACK, tcpACK}, StateEstablished, testTimeouts.TCPEstablished},
		{"closing", protoTCP, []uint8{tcpSYN, tcpACK, tcpFIN}, StateClosing, testTimeouts.TCPClosing},
		{"udp new", 17, []uint8{0}, StateUDPNew, testTimeouts.UDP},
		{"udp", 17, []uint8{0, 0, 0}, StateUDP, testTimeouts.UDP},
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
