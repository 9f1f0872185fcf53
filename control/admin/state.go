package admin

import (
	"context"
	"time"

	"github.com/vipd/vipd/conntrack"
	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/dataplane"
	"github.com/vipd/vipd/health"
)

// WireConntrack is st as /v1/state carries it. The two types have the
// same fields, so that the conversion stops compiling when they part, and
// the same JSON (TestWireConntrack).
func WireConntrack(st conntrack.Stats) api.ConntrackStats {
	return api.ConntrackStats(st)
}

// Metrics is the raw material of /metrics, taken in one go.
type Metrics struct {
	Workers   []*dataplane.Counters
	Conntrack conntrack.Stats
	// VIPNames names VIP IDs, Backends backend references, for labels;
	// NATVIPs holds the IDs of the NAT VIPs, whose replies vipd sees.
	VIPNames map[uint16]string
	Backends map[uint32]BackendLabel
	NATVIPs  map[uint16]bool
	// Driver holds driver counters by name (e.g. "tx_ring_full"), summed
	// over queues.
	Driver map[string]uint64
	// Gauges: backend forwarding state (1 up, 0.5 draining, 0 down) by ref.
	BackendUp map[uint32]float64
	// Ejections counts each backend's passive outlier ejections by ref;
	// Ejected holds the refs ejected now.
	Ejections map[uint32]uint64
	Ejected   map[uint32]bool
	// HealthTransitions counts each backend's check verdict changes by
	// ref, LastChange holds when its verdict last changed.
	HealthTransitions map[uint32]uint64
	LastChange        map[uint32]time.Time
	// EffectiveWeight is each backend's weight after slow start and its
	// load report (api.BackendState.EffectiveWeight) by ref;
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
	// State's active_flows, up to its cache's age), and at
	// ref|conntrack.InactiveBit those of them not established; nil while
	// the workers do not run. Version and GoVersion label vipd_build_info.
	ActiveFlows        map[uint32]int
	Version, GoVersion string
	// Role is the box's neighbor role; RoleChanges counts its switches
	// since start (vipd active, vipd standby).
	Role        string
	RoleChanges uint64
	// Fleet is the box's view of its fleet; nil without [fleet].
	Fleet *api.FleetState
	// Config is the configuration file's state: whether the last load
	// (start or reload) applied, when the configuration last loaded, and
	// whether the file on disk differs from the one that runs.
	Config ConfigMetrics
}

// ConfigMetrics is the configuration file's part of Metrics.
type ConfigMetrics struct {
	LastReloadOK bool
	LoadedAt     time.Time
	FileDiffers  bool
}

// BackendLabel identifies a backend in metric labels.
type BackendLabel struct {
	VIP     string
	Backend string // addr:port
	NAT     bool   // of a NAT VIP: its replies pass vipd
}

// Provider is what the daemon offers the admin server.
type Provider interface {
	// Ready returns nil once the daemon serves (its workers run), and
	// otherwise why not; the handlers answer 503 meanwhile.
	Ready() error
	State(ctx context.Context) (*api.State, error)
	Metrics() *Metrics
	// SetDrain drains (or undrains) backend ("addr:port", or "addr" when
	// the VIP does not rewrite ports) of the VIP named vip.
	SetDrain(vip, backend string, drain bool, reason string) error
	// Events returns the event log after sequence number seq, at most
	// max events (0: all it keeps).
	Events(seq uint64, max int) *api.EventsAnswer
	// Histories returns the last five minutes of each VIP and backend,
	// for the status page's sparklines.
	Histories() *api.Histories
	// Where answers which backend a new flow from client ("addr:port") to
	// the VIP named vip (on port, for every-port VIPs) would get.
	Where(vip, client string, port uint16) (*api.WhereAnswer, error)
}
