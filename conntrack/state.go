package conntrack

import (
	"math"
	"time"
)

// Tick is the table's coarse clock: whole seconds since the Table was
// created (see Table.Now). The owner of a shard hands it to Shard.Advance
// once per batch; nothing on the per-packet path reads the wall clock.
// A uint32 of seconds lasts 136 years, so tick arithmetic never wraps.
type Tick uint32

// TickDuration is the length of one Tick.
const TickDuration = time.Second

// Ticks converts d to ticks, rounding up so that a timeout never fires
// earlier than configured. Negative durations give 0; huge ones saturate.
func Ticks(d time.Duration) Tick {
	if d <= 0 {
		return 0
	}
	t := (d + TickDuration - 1) / TickDuration
	if t > math.MaxUint32 {
		return math.MaxUint32
	}
	return Tick(t)
}

// State is the protocol state of a flow as far as a middlebox that sees only
// the client's half of it can tell. vipd never sees the server's side in
// DSR, and NAT replies are translated statelessly (possibly on another
// worker) without touching the table, so in both modes the table knows only
// what the client sends, and a client's packets can be spoofed. The zero
// State marks a free slot.
//
// Besides its State every flow has a proof level: the number of distinct
// ticks (seconds) in which it sent packets that carry a conversation (for
// TCP, any packet but a SYN without ACK, a FIN or a RST; for other
// protocols, every datagram), capped at ProofTicks. A flow that reaches ProofTicks is proven and is never
// evicted to make room for a new one; below it, it may be (Entry.Evictable).
// Proof needs the flow to live through time, not just to send a certain
// packet: docs/configuration.md, "The connection table under a flood",
// says why.
//
//	TCP (Proto 6), by the flags of each client packet ("FIN/RST": FIN or
//	RST set; "SYN": else SYN without ACK; "other": the rest):
//	  first packet   SYN (no ACK) → SynSent (level 0), FIN or RST → Closing (level 0),
//	                 anything else → Unconfirmed (level 1: picked up mid-stream)
//	  SynSent        SYN → SynSent, FIN/RST → Closing, other → Unconfirmed (level 1)
//	  Unconfirmed    other in a later tick than the flow's last packet → level+1,
//	                 and at level ProofTicks → Established;
//	                 other in the same tick, or a SYN → no change;
//	                 FIN/RST → Closing
//	  Established    FIN/RST → Closing, anything else → Established    (level ProofTicks)
//	  Closing        SYN → SynSent (the tuple is being reused, level 0),
//	                 else → Closing, keeping its level
//	every other protocol (UDP, ICMP, ...), whatever the flags:
//	  first packet → UDPNew (level 1)
//	  UDPNew         packet in a later tick than the last one → level+1, and
//	                 at level ProofTicks → UDP; same tick → no change
//	  UDP            → UDP
//
// So a TCP flow is Established after packets other than SYNs, FINs and
// RSTs in ProofTicks distinct ticks, which span more than ProofTicks-2
// seconds; a flow first seen mid-stream (e.g. after a restart, or after
// it lost its entry) counts its first packet. A Closing flow keeps the
// level it had: a proven flow that half-closes (and goes on acknowledging
// a download) stays unevictable until its Closing timeout, while a spoofed
// FIN or RST never is.
type State uint8

const (
	StateSynSent     State = iota + 1 // TCP: only SYNs
	StateUnconfirmed                  // TCP: past the SYN, not yet proven (evictable)
	StateEstablished                  // TCP: proven (never evicted)
	StateClosing                      // TCP: FIN or RST seen (evictable unless proven before)
	StateUDPNew                       // non-TCP: not yet proven (evictable)
	StateUDP                          // non-TCP: proven (never evicted)
)

// ProofTicks is the proof level at which a flow becomes Established (TCP)
// or UDP and can no longer be evicted: packets in this many distinct ticks.
const ProofTicks = 3

var stateNames = [...]string{
	0:                "Free",
	StateSynSent:     "SynSent",
	StateUnconfirmed: "Unconfirmed",
	StateEstablished: "Established",
	StateClosing:     "Closing",
	StateUDPNew:      "UDPNew",
	StateUDP:         "UDP",
}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "State(?)"
}

// A slot's state byte (bucket.state) packs the State, the proof level and
// altBit (bucket.go):
//
//	bit 7 altBit | bits 3-4 level (0..ProofTicks) | bits 0-2 State
//
// The low five bits are the flow's phase; the transition table maps a phase
// and a packet to the next phase.
const (
	levelShift = 3
	levelMask  = 0x3 << levelShift
	phaseMask  = stateMask | levelMask
	proven     = ProofTicks << levelShift // level bits of a proven flow
)

// The level bits hold 0..3.
const _ = uint(3 - ProofTicks)

// phase returns the phase byte of State st at proof level lv.
func phase(st State, lv uint8) uint8 { return uint8(st) | lv<<levelShift }

// evictable reports whether a flow whose state byte is b may be evicted to
// make room for a new one: it has not proven itself (level < ProofTicks).
func evictable(b uint8) bool { return b&levelMask != proven }

// TCP header flag bits (RFC 9293, byte 13 of the header) that drive the
// state machine; the pipeline passes that byte unchanged.
const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpACK = 0x10
)

// Packet classes the TCP state machine tells apart.
const (
	classOther = iota // no SYN, FIN or RST: an ACK or data
	classSYN          // SYN without ACK: a connection attempt
	classEnd          // FIN or RST
	numClasses
)

// classOf maps a TCP flags byte to its class; a table keeps Touch branch-free.
var classOf = func() (c [256]uint8) {
	for f := range c {
		switch {
		case f&(tcpFIN|tcpRST) != 0:
			c[f] = classEnd
		case f&(tcpSYN|tcpACK) == tcpSYN:
			c[f] = classSYN
		default:
			c[f] = classOther
		}
	}
	return c
}()

// next is the transition table documented on State, indexed by the current
// phase, the class of the packet and whether the packet is in a later tick
// than the flow's last one (1) or the same (0). Rows for unused phases stay
// zero; they are never read because a live slot always holds a valid phase.
var next = func() (t [phaseMask + 1][numClasses][2]uint8) {
	set := func(from uint8, class int, same, later uint8) {
		t[from][class] = [2]uint8{same, later}
	}
	both := func(from uint8, class int, to uint8) { set(from, class, to, to) }

	syn := phase(StateSynSent, 0)
	both(syn, classOther, phase(StateUnconfirmed, 1))
	both(syn, classSYN, syn)
	both(syn, classEnd, phase(StateClosing, 0))
	for lv := uint8(1); lv < ProofTicks; lv++ {
		p := phase(StateUnconfirmed, lv)
		up := phase(StateUnconfirmed, lv+1)
		if lv+1 == ProofTicks {
			up = phase(StateEstablished, ProofTicks)
		}
		set(p, classOther, p, up)
		both(p, classSYN, p)
		both(p, classEnd, phase(StateClosing, lv))
	}
	est := phase(StateEstablished, ProofTicks)
	both(est, classOther, est)
	both(est, classSYN, est)
	both(est, classEnd, phase(StateClosing, ProofTicks))
	for lv := uint8(0); lv <= ProofTicks; lv++ {
		p := phase(StateClosing, lv)
		both(p, classOther, p)
		both(p, classSYN, syn)
		both(p, classEnd, p)
	}
	for lv := uint8(1); lv < ProofTicks; lv++ {
		p := phase(StateUDPNew, lv)
		up := phase(StateUDPNew, lv+1)
		if lv+1 == ProofTicks {
			up = phase(StateUDP, ProofTicks)
		}
		for c := range numClasses {
			set(p, c, p, up)
		}
	}
	udp := phase(StateUDP, ProofTicks)
	for c := range numClasses {
		both(udp, c, udp)
	}
	return t
}()

// initialPhase is the phase of a flow created by a packet of protocol proto
// with TCP flags tcpFlags (ignored for non-TCP).
func initialPhase(proto uint8, tcpFlags uint8) uint8 {
	if proto != protoTCP {
		return phase(StateUDPNew, 1)
	}
	return initialTCP[classOf[tcpFlags]]
}

// initialTCP is the phase of a TCP flow created by a packet of each class.
var initialTCP = [numClasses]uint8{
	classOther: phase(StateUnconfirmed, 1),
	classSYN:   phase(StateSynSent, 0),
	classEnd:   phase(StateClosing, 0),
}

// Timeouts are the idle times after which a flow in each state expires.
// A zero field takes the value of DefaultTimeouts. Durations are rounded up
// to whole ticks, so an entry expires between T and T+1s after its last packet.
type Timeouts struct {
	TCPUnestablished time.Duration // StateSynSent (only SYNs seen)
	TCPUnconfirmed   time.Duration // StateUnconfirmed
	TCPEstablished   time.Duration // StateEstablished
	TCPClosing       time.Duration // StateClosing
	UDP              time.Duration // StateUDPNew and StateUDP (every non-TCP protocol)
}

// The default timeouts, one per state class: the one place they are set
// (package config refers to them for its defaults, vipd.toml(5) shows
// them).
//
// SynSent outlives the gaps between a client's SYN retransmissions
// (1, 2, 4, 8, 16 s). Unconfirmed bounds the gap between the packets that
// prove a flow; an unproven flow that expires loses only its pin, like an
// idle established flow that does: its next packet goes through Maglev
// again.
const (
	DefaultTCPUnestablished = 30 * time.Second
	DefaultTCPUnconfirmed   = 30 * time.Second
	DefaultTCPEstablished   = 15 * time.Minute
	DefaultTCPClosing       = 30 * time.Second
	DefaultUDP              = 60 * time.Second
)

// DefaultTimeouts returns the timeouts used for zero fields of Timeouts.
func DefaultTimeouts() Timeouts {
	return Timeouts{
		TCPUnestablished: DefaultTCPUnestablished,
		TCPUnconfirmed:   DefaultTCPUnconfirmed,
		TCPEstablished:   DefaultTCPEstablished,
		TCPClosing:       DefaultTCPClosing,
		UDP:              DefaultUDP,
	}
}

// ticksByState converts t (with defaults filled in) into the per-state
// table the shard consults on every expiry check.
func (t Timeouts) ticksByState() (out [stateMask + 1]Tick) {
	d := DefaultTimeouts()
	pick := func(v, def time.Duration) Tick {
		if v == 0 {
			v = def
		}
		return Ticks(v)
	}
	out[StateSynSent] = pick(t.TCPUnestablished, d.TCPUnestablished)
	out[StateUnconfirmed] = pick(t.TCPUnconfirmed, d.TCPUnconfirmed)
	out[StateEstablished] = pick(t.TCPEstablished, d.TCPEstablished)
	out[StateClosing] = pick(t.TCPClosing, d.TCPClosing)
	out[StateUDPNew] = pick(t.UDP, d.UDP)
	out[StateUDP] = out[StateUDPNew]
	return out
}
