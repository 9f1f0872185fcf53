package admin

import (
	"context"
	"time"

	"github.com/vipd/vipd/conntrack"
	"github.com/vipd/vipd/dataplane"
	"github.com/vipd/vipd/health"
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
	FastPath  bool            `json:"fast_path"`
	VIPs      []VIPState      `json:"vips"`
	Conntrack conntrack.Stats `json:"conntrack"`
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
	// WorkersDetail holds each worker's rates (admin/rates.go); the
	// contract's Workers name is taken by the worker count.
	WorkersDetail []WorkerState `json:"workers_detail"`
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
	BackendsUp int    `json:"backends_up"`
	MinHealthy int    `json:"min_healthy"`
	Packets    uint64 `json:"packets"`
	Bytes      uint64 `json:"bytes"`
	NewFlows   uint64 `json:"new_flows"`
	// Announce says what BGP does with the VIP: "" without [bgp], "off"
	// (announce = false), "announced", or "withdrawn: WHY".
	Announce string `json:"announce,omitempty"`
	// PreviousUntil is when the VIP's previous backend set (previous_owner)
	// expires; zero while it has none.
	PreviousUntil time.Time      `json:"previous_until,omitzero"`
	Backends      []BackendState `json:"backends"`
	// Rates are per second over the last sampling interval; ActiveFlows
	// sums the backends' flows.
	Rates       Rates `json:"rates"`
	ActiveFlows int   `json:"active_flows"`
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
	// SlowStart is the fraction of the weight a ramping backend has, 1 when
	// not ramping.
	SlowStart float64 `json:"slow_start"`
	// EffectiveWeight is the configured weight times the fractions slow
	// start and the backend's load report leave it; Load is the load
	// report's fraction alone (1: no report, or an idle backend).
	EffectiveWeight float64 `json:"effective_weight"`
	Load            float64 `json:"load_fraction"`
	ActiveFlows     int     `json:"active_flows"`
	Packets         uint64  `json:"packets"`
	Bytes           uint64  `json:"bytes"`
	NewFlows        uint64  `json:"new_flows"`
	// Override is the run-time override in force (vipd weight, vipd
	// disable); nil: none, the file rules.
	Override *Override `json:"override,omitempty"`
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
}

// Metrics is the raw material of /metrics, taken in one go.
type Metrics struct {
	Workers   []*dataplane.Counters
	Conntrack conntrack.Stats
	// VIPNames names VIP IDs, Backends backend references, for labels.
	VIPNames map[uint16]string
	Backends map[uint32]BackendLabel
	// Driver holds driver counters by name (e.g. "tx_ring_full"), summed
	// over queues.
	Driver map[string]uint64
	// Gauges: backend forwarding state (1 up, 0.5 draining, 0 down) by ref.
	BackendUp map[uint32]float64
	// Ejections counts each backend's passive outlier ejections by ref;
	// Ejected holds the refs ejected now.
	Ejections map[uint32]uint64
	Ejected   map[uint32]bool
	// EffectiveWeight is each backend's weight after slow start and its
	// load report (BackendState.EffectiveWeight) by ref;
	// LoadReportsMalformed counts its malformed load reports.
	EffectiveWeight      map[uint32]float64
	LoadReportsMalformed map[uint32]uint64
	Reloads              map[string]uint64 // by result: ok, error
	AllDown              map[string]uint64 // events per VIP name
	Generation           uint64
	FastPath             bool        // the XDP fast path runs
	BGP                  *BGPMetrics // nil without [bgp]
	// PreviousUntil: when each VIP's previous backend set (previous_owner)
	// expires, for the VIPs that have one; StateErrors counts failed reads
	// and writes of the state file.
	PreviousUntil map[string]time.Time
	StateErrors   uint64
	// WorkersStalled is how many workers make no progress now (routes
	// withdrawn, not ready while it is above 0); WorkerStalls counts the
	// times one or more were found stalled.
	WorkersStalled int
	WorkerStalls   uint64
	// TunnelProber holds the tunnel health prober's counters by event
	// (sent, not_probe, unknown, send_error, read_error), summed since
	// start; nil while no DSR VIP has ever had probe = "tunnel".
	TunnelProber map[string]uint64
	// HealthChecks holds each checked backend's check totals and
	// durations by ref (health.Record).
	HealthChecks map[uint32]health.Record
	// ActiveFlows counts the flows pinned to each backend by ref (the
	// State's active_flows, up to its cache's age); nil while the workers
	// do not run. Version and GoVersion label vipd_build_info.
	ActiveFlows        map[uint32]int
	Version, GoVersion string
	// Role is the box's neighbor role; RoleChanges counts its switches
	// since start (vipd active, vipd standby).
	Role        string
	RoleChanges uint64
}

// BackendLabel identifies a backend in metric labels.
type BackendLabel struct {
	VIP     string
	Backend string // addr:port
}

// Provider is what the daemon offers the admin server.
type Provider interface {
	// Ready returns nil once the daemon serves (its workers run), and
	// otherwise why not; the handlers answer 503 meanwhile.
	Ready() error
	State(ctx context.Context) (*State, error)
	Metrics() *Metrics
	// SetDrain drains (or undrains) backend ("addr:port", or "addr" when
	// the VIP does not rewrite ports) of the VIP named vip.
	SetDrain(vip, backend string, drain bool) error
	// Where answers which backend a new flow from client ("addr:port") to
	// the VIP named vip (on port, for every-port VIPs) would get.
	Where(vip, client string, port uint16) (*WhereAnswer, error)
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
