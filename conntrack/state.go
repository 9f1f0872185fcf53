package conntrack

import (
	"math"
	"time"

	"github.com/vipd/vipd/config"
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
// the client's half of it (DSR) can tell. The zero State marks a free slot.
//
//	TCP (Proto 6), by the flags of each client packet:
//	  first packet   FIN or RST → Closing, anything else → SynSent
//	  SynSent        SYN (no ACK) → SynSent, FIN/RST → Closing, other → Established
//	  Established    FIN/RST → Closing, anything else → Established
//	  Closing        SYN (no ACK) → SynSent (the tuple is being reused), else → Closing
//	every other protocol (UDP, ICMP, ...):
//	  first packet → UDPNew, any later packet → UDP
//
// A TCP flow first seen mid-stream (no SYN, e.g. after a restart) starts in
// SynSent too and becomes Established on its second packet, so a flood of
// spoofed ACKs cannot fill the table with unevictable entries.
type State uint8

const (
	StateSynSent     State = iota + 1 // TCP, unestablished: one packet or only SYNs seen
	StateEstablished                  // TCP, a non-SYN packet followed the first one
	StateClosing                      // TCP, FIN or RST seen
	StateUDPNew                       // non-TCP, one packet seen
	StateUDP                          // non-TCP, two or more packets seen
)

var stateNames = [...]string{
	0:                "Free",
	StateSynSent:     "SynSent",
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

// Evictable reports whether Insert may evict a flow in state s to make room
// for a new one. Only flows that have shown a single packet (or only SYNs)
// qualify: everything else has carried a conversation and is kept until it
// times out or is deleted.
func (s State) Evictable() bool { return s == StateSynSent || s == StateUDPNew }

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
// state and the class of the packet. Rows for unused state values stay zero;
// they are never read because a live slot always holds a valid state.
var next = [stateMask + 1][numClasses]State{
	StateSynSent:     {StateEstablished, StateSynSent, StateClosing},
	StateEstablished: {StateEstablished, StateEstablished, StateClosing},
	StateClosing:     {StateClosing, StateSynSent, StateClosing},
	StateUDPNew:      {StateUDP, StateUDP, StateUDP},
	StateUDP:         {StateUDP, StateUDP, StateUDP},
}

// initialState is the state of a flow created by a packet of protocol proto
// with TCP flags tcpFlags (ignored for non-TCP).
func initialState(proto uint8, tcpFlags uint8) State {
	if proto != protoTCP {
		return StateUDPNew
	}
	if classOf[tcpFlags] == classEnd {
		return StateClosing
	}
	return StateSynSent
}

// Timeouts are the idle times after which a flow in each state expires.
// A zero field takes the value of DefaultTimeouts. Durations are rounded up
// to whole ticks, so an entry expires between T and T+1s after its last packet.
type Timeouts struct {
	TCPUnestablished time.Duration // StateSynSent
	TCPEstablished   time.Duration // StateEstablished
	TCPClosing       time.Duration // StateClosing
	UDP              time.Duration // StateUDPNew and StateUDP (every non-TCP protocol)
}

// DefaultTimeouts returns the timeouts used for zero fields of Timeouts:
// the defaults of package config, the one place they are set.
//
// SynSent outlives the gaps between a client's SYN retransmissions
// (1, 2, 4, 8, 16 s); an idle established flow that does expire loses only
// its pin: its next packet goes through Maglev again.
func DefaultTimeouts() Timeouts {
	return Timeouts{
		TCPUnestablished: config.DefaultTCPUnestablished,
		TCPEstablished:   config.DefaultTCPEstablished,
		TCPClosing:       config.DefaultTCPClosing,
		UDP:              config.DefaultUDPTimeout,
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
	out[StateEstablished] = pick(t.TCPEstablished, d.TCPEstablished)
	out[StateClosing] = pick(t.TCPClosing, d.TCPClosing)
	out[StateUDPNew] = pick(t.UDP, d.UDP)
	out[StateUDP] = out[StateUDPNew]
	return out
}
