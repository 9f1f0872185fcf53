package api

import (
	"fmt"
	"strings"
	"time"
)

// State is the answer of GET /v1/state.
type State struct {
	Version    string    `json:"version"`
	ConfigFile string    `json:"config_file"`
	LoadedAt   time.Time `json:"loaded_at"`
	// Generation counts the snapshots published since start.
	Generation uint64 `json:"generation"`
	IO         string `json:"io"`
	Workers    int    `json:"workers"`
	// FastPath: the XDP fast path runs (fast_path "on", or "auto" found
	// the interfaces able at start).
	FastPath  bool           `json:"fast_path"`
	VIPs      []VIPState     `json:"vips"`
	Conntrack ConntrackStats `json:"conntrack"`
	// BGP is the speaker's state; nil without [bgp].
	BGP *BGPState `json:"bgp,omitempty"`
	// ConfigDiffers: the file on disk is not the one the running
	// configuration was loaded from (edited since, and not reloaded, or
	// its reload failed). ConfigError is the last reload's errors, one a
	// line, while it failed; a reload that applies clears it.
	ConfigDiffers bool   `json:"config_differs"`
	ConfigError   string `json:"config_error,omitempty"`
	// Role is the box's neighbor role (RoleActive or RoleStandby), since
	// RoleSince: a standby box answers no ARP/NDP for its VIPs and
	// announces none.
	Role      string    `json:"role"`
	RoleSince time.Time `json:"role_since"`
	// WorkersDetail holds each worker's rates (WorkerState); the
	// contract's Workers name is taken by the worker count.
	WorkersDetail []WorkerState `json:"workers_detail"`
	// Fleet is the box's fleet, when its file has [fleet]; nil
	// otherwise.
	Fleet *FleetState `json:"fleet,omitempty"`
}

// FleetState is a box's view of its fleet (docs/fleet.md).
type FleetState struct {
	Endpoints []string `json:"endpoints"`
	Prefix    string   `json:"prefix"`
	Box       string   `json:"box"`
	// Connected: the box's watch on etcd runs and etcd answered since it
	// last failed.
	Connected bool `json:"connected"`
	// Stale: the box cannot know it runs the fleet's latest revision
	// (etcd away, or silent for longer than a few progress requests, or
	// the box started from its cache and has not reached etcd since).
	// Traffic is not affected: the box forwards with what it applied.
	Stale bool `json:"stale"`
	// FromCache: the box started from CacheFile while etcd was away and
	// has not read etcd since.
	FromCache bool `json:"from_cache"`
	// Revision is etcd's revision of the keys in force, Digest their
	// sha256 (the same on every box that applied them), Applied when the
	// box applied them, Current when it last learned they are the
	// latest; AgeSeconds is the time since Current.
	Revision   int64     `json:"revision"`
	Digest     string    `json:"digest"`
	Applied    time.Time `json:"applied,omitzero"`
	Current    time.Time `json:"current,omitzero"`
	AgeSeconds float64   `json:"age_seconds"`
	// Refused is the last revision the box refused (0: none since it
	// last applied one), RefusedWhy why; ApplyErrors counts refusals.
	Refused     int64  `json:"refused,omitempty"`
	RefusedWhy  string `json:"refused_why,omitempty"`
	ApplyErrors uint64 `json:"apply_errors"`
	// EtcdError is the last failure to read or watch etcd, while it
	// lasts.
	EtcdError string `json:"etcd_error,omitempty"`
	// CacheFile holds the last applied revision; CacheErrors counts
	// failed writes of it.
	CacheFile   string `json:"cache_file"`
	CacheErrors uint64 `json:"cache_errors"`
	// Ignored lists the fleet's keys the box did not apply, and why (an
	// override naming no backend, a stray key).
	Ignored []string `json:"ignored,omitempty"`
}

// FleetOverride is one of the fleet's overrides in force on a backend.
type FleetOverride struct {
	// What is "drain", "disabled" or "weight N".
	What string    `json:"what"`
	By   string    `json:"by,omitempty"`
	Why  string    `json:"why,omitempty"`
	At   time.Time `json:"at,omitzero"`
}

// VIPState is one VIP in State.
type VIPState struct {
	Name      string `json:"name"`
	Address   string `json:"address"`
	Port      uint16 `json:"port"`
	Protocol  string `json:"protocol"`
	Mode      string `json:"mode"`
	FlowHash  string `json:"flow_hash"`
	TableSize uint32 `json:"table_size"`
	// Scheduler picks the backends of new flows (config's vip.scheduler).
	Scheduler string `json:"scheduler,omitempty"`
	// AllDown: every enabled backend failed its health check; OnAllDown
	// says what the VIP does about it.
	AllDown   bool   `json:"all_down"`
	OnAllDown string `json:"on_all_down"`
	// BackendsUp counts the enabled backends that are up (neither down
	// nor draining), against the VIP's min_healthy: below it, BGP
	// withdraws the VIP and `vipd keepalived-check` fails.
	BackendsUp int `json:"backends_up"`
	MinHealthy int `json:"min_healthy"`
	// Packets and Bytes are the clients' packets forwarded to the
	// backends (ipvsadm's InPkts, InBytes); OutPackets and OutBytes the
	// NAT replies relayed to clients (OutPkts, OutBytes), absent for a
	// DSR VIP, whose replies bypass vipd. Each is the sum of the
	// backends'.
	Packets    uint64  `json:"packets"`
	Bytes      uint64  `json:"bytes"`
	OutPackets *uint64 `json:"out_packets,omitempty"`
	OutBytes   *uint64 `json:"out_bytes,omitempty"`
	NewFlows   uint64  `json:"new_flows"`
	// Announce says what BGP does with the VIP: "" without [bgp], "off"
	// (announce = false), "announced", or "withdrawn: WHY".
	Announce string `json:"announce,omitempty"`
	// PreviousUntil is when the VIP's previous backend set (previous_owner)
	// expires; zero while it has none.
	PreviousUntil time.Time      `json:"previous_until,omitzero"`
	Backends      []BackendState `json:"backends"`
	// Rates are per second over the last sampling interval; ActiveFlows
	// sums the backends' flows.
	Rates         Rates `json:"rates"`
	ActiveFlows   int   `json:"active_flows"`
	InactiveFlows int   `json:"inactive_flows"` // the backends' InactiveFlows, summed
	// QUICLB is the VIP's QUIC-LB routing ([vip.quic_lb]), nil without.
	QUICLB *QUICLBState `json:"quic_lb,omitempty"`
}

// QUICLBState is a VIP's QUIC-LB routing. Keys are never shown.
type QUICLBState struct {
	Enabled bool                `json:"enabled"`
	Configs []QUICLBConfigState `json:"configs"`
}

// QUICLBConfigState is one QUIC-LB configuration.
type QUICLBConfigState struct {
	Rotation    int `json:"rotation"`
	ServerIDLen int `json:"server_id_len"`
	NonceLen    int `json:"nonce_len"`
	// Form is how its server IDs decode: "plaintext", "single-pass"
	// (one AES block), "three-pass" or "four-pass" (the Feistel network).
	Form string `json:"form"`
}

// Summary sums up q for the status table and page: "off", or its
// configurations, like "0:plaintext,1:three-pass".
func (q *QUICLBState) Summary() string {
	if !q.Enabled {
		return "off"
	}
	parts := make([]string, len(q.Configs))
	for i, c := range q.Configs {
		parts[i] = fmt.Sprintf("%d:%s", c.Rotation, c.Form)
	}
	return strings.Join(parts, ",")
}

// BackendState is one backend in State.
type BackendState struct {
	Address string `json:"address"`
	Port    uint16 `json:"port"` // 0: the client's destination port
	Ref     uint32 `json:"ref"`
	// Weight is the configured weight; MaglevWeight what the table uses
	// now (scaled, slow start applied; 0 when it takes no new flows).
	Weight       uint32 `json:"weight"`
	MaglevWeight uint32 `json:"maglev_weight"`
	// Config is the configured state (active, draining, disabled); Health
	// the check's verdict (up, down, unknown, none); Drained whether the
	// admin API or the check drains it; Forwarding what the dataplane does
	// (up: new and existing flows, draining: existing only, down: none).
	Config     string `json:"config"`
	Health     string `json:"health"`
	Drained    bool   `json:"drained"`
	Forwarding string `json:"forwarding"`
	// DrainReason is the reason given with the admin API's drain
	// (vipd drain -reason).
	DrainReason string `json:"drain_reason,omitempty"`
	// AwaitingCheck: the backend takes no new flows until its first
	// health check ends (init_state "down", at start or when a reload
	// added it).
	AwaitingCheck bool `json:"awaiting_check,omitempty"`
	// MaxFlows is the backend's max_flows (0: none); AtMaxFlows says it
	// reached it and takes no new flows until under 3/4 of it.
	MaxFlows   int  `json:"max_flows,omitempty"`
	AtMaxFlows bool `json:"at_max_flows,omitempty"`
	// SlowStart is the fraction of the weight a ramping backend has, 1 when
	// not ramping.
	SlowStart float64 `json:"slow_start"`
	// EffectiveWeight is the configured weight times the fractions slow
	// start and the backend's load report leave it; Load is the load
	// report's fraction alone (1: no report, or an idle backend).
	EffectiveWeight float64 `json:"effective_weight"`
	Load            float64 `json:"load_fraction"`
	ActiveFlows     int     `json:"active_flows"`
	// InactiveFlows counts those of ActiveFlows not established:
	// half-open, closing, or datagram flows not yet proven (ipvsadm's
	// InActConn; the established ones are its ActiveConn).
	InactiveFlows int `json:"inactive_flows"`
	// Packets, Bytes, OutPackets and OutBytes: as VIPState's.
	Packets    uint64  `json:"packets"`
	Bytes      uint64  `json:"bytes"`
	OutPackets *uint64 `json:"out_packets,omitempty"`
	OutBytes   *uint64 `json:"out_bytes,omitempty"`
	NewFlows   uint64  `json:"new_flows"`
	// Override is the run-time override in force (vipd weight, vipd
	// disable); nil: none, the file rules.
	Override *Override `json:"override,omitempty"`
	// FleetOverride is the fleet's override in force (vipd drain -fleet
	// and the like: a key in etcd); nil: none.
	FleetOverride *FleetOverride `json:"fleet_override,omitempty"`
	// LastError is why the last health check failed ("" when it passed),
	// StateSince when the check's verdict last changed, LastCheckSeconds
	// how long the last check took (health.Record).
	LastError        string    `json:"last_error,omitempty"`
	StateSince       time.Time `json:"state_since,omitzero"`
	LastCheckSeconds float64   `json:"last_check_seconds"`
	Rates            Rates     `json:"rates"`
	// QUICServerIDs are the backend's QUIC-LB server IDs in hex, by
	// configuration codepoint ("0": "0a01").
	QUICServerIDs map[string]string `json:"quic_lb_server_ids,omitempty"`
	// Handshakes is how the backend answers its TCP handshakes; nil
	// before its first.
	Handshakes *HandshakeState `json:"handshakes,omitempty"`
}

// HandshakeState is a backend's TCP handshakes: in NAT mode answered by
// the backend's SYN-ACK, in DSR mode by the client going on past its SYN
// (docs/operations.md, "Handshakes"). A handshake counts as unanswered
// when no answer came within WindowSeconds.
type HandshakeState struct {
	WindowSeconds float64 `json:"window_seconds"`
	// Tried counts the handshakes judged over the last minute (begun in
	// the minute that ended a window ago), Answered the answers of the
	// last minute, Share the answered share (capped at 1; 1 with none
	// tried). The Recent pair is the same over the last 10 s.
	Tried          uint64  `json:"tried"`
	Answered       uint64  `json:"answered"`
	Share          float64 `json:"answered_share"`
	RecentTried    uint64  `json:"recent_tried"`
	RecentAnswered uint64  `json:"recent_answered"`
	// Timed counts the answered handshakes of the last minute whose time
	// was measured, P50Seconds and P99Seconds their median and 99th
	// percentile (0 with none).
	Timed      uint64  `json:"timed"`
	P50Seconds float64 `json:"p50_seconds"`
	P99Seconds float64 `json:"p99_seconds"`
	// Total and AnsweredTotal are the counters since start.
	Total         uint64 `json:"total"`
	AnsweredTotal uint64 `json:"answered_total"`
	// Unanswered says why the backend is flagged: under 10 % of at least
	// 5 handshakes answered in the last 10 s ("answered 0 of 69
	// handshakes in the last 10 s"); "" when it is not.
	Unanswered string `json:"unanswered,omitempty"`
}

// ConntrackStats is the connection table in State: the daemon's
// conntrack.Stats, field for field. The fields carry no JSON tags: their
// names are the keys, as they have always been on the wire.
type ConntrackStats struct {
	Capacity uint64 // slots (flows the table can hold at most)
	Entries  uint64 // occupied slots, including timed-out flows not yet reclaimed
	Inserts  uint64 // flows stored, whatever slot they took

	Expirations          uint64 // timed-out flows reclaimed
	EvictedExpired       uint64 // timed-out flows overwritten in a full bucket pair
	EvictedUnestablished uint64 // unproven (evictable) live flows overwritten in a full bucket pair
	UntrackedFull        uint64 // inserts refused: the flow goes stateless
	Relocations          uint64 // flows moved to their other bucket to make room
	Deletes              uint64 // flows removed
	Repicks              uint64 // flows re-pinned off a removed or down backend, tuples given to a new connection
}

// WhereAnswer is the answer of GET /v1/where.
type WhereAnswer struct {
	VIP     string `json:"vip"`
	Client  string `json:"client"`
	Backend string `json:"backend"` // addr:port, or addr for DSR
	// Previous is the backend the VIP's previous set (previous_owner)
	// gives the flow when it differs from Backend: a mid-stream packet of
	// it that misses the connection table carries it as a hint.
	Previous string `json:"previous,omitempty"`
	Note     string `json:"note"`
}

// Rates are a VIP's or a backend's traffic per second over the daemon's
// last sampling interval (one second; control/daemon/rates.go).
type Rates struct {
	PacketsPerSec  float64 `json:"packets_per_sec"`
	BytesPerSec    float64 `json:"bytes_per_sec"`
	NewFlowsPerSec float64 `json:"new_flows_per_sec"`
	// The replies relayed (NAT only: absent for DSR, whose replies
	// bypass vipd).
	OutPacketsPerSec *float64 `json:"out_packets_per_sec,omitempty"`
	OutBytesPerSec   *float64 `json:"out_bytes_per_sec,omitempty"`
}

// WorkerState is one worker (one queue) in State.WorkersDetail, its rates over
// the last sampling interval: frames received, frames sent (forwarded and
// NAT replies) and drops per second by reason.
type WorkerState struct {
	Queue        int                `json:"queue"`
	RxPerSec     float64            `json:"rx_packets_per_sec"`
	TxPerSec     float64            `json:"tx_packets_per_sec"`
	DropsPerSec  map[string]float64 `json:"drops_per_sec,omitempty"`
	RxPackets    uint64             `json:"rx_packets"`
	DroppedTotal uint64             `json:"dropped"`
}

// History is a VIP's or backend's last five minutes for the status page's
// sparklines: per-second averages over points of StepSeconds, oldest
// first. Answered is the answered share of the point's handshakes, -1
// where it had none.
type History struct {
	StepSeconds float64   `json:"step_seconds"`
	NewFlows    []float64 `json:"new_flows_per_sec"`
	InPackets   []float64 `json:"in_packets_per_sec"`
	OutPackets  []float64 `json:"out_packets_per_sec"`
	Answered    []float64 `json:"answered_share"`
}

// Histories are the History of every VIP (by name) and backend (by VIP
// name, a space and the backend's ADDR:PORT) that has one.
type Histories struct {
	VIPs     map[string]*History `json:"vips"`
	Backends map[string]*History `json:"backends"`
}
