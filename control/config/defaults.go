package config

import (
	"time"

	"github.com/vipd/vipd/conntrack"
	"github.com/vipd/vipd/dsr"
)

// Defaults. config.toml.example documents each of them next to its knob;
// TestExampleDocumentsDefaults keeps the two in step.
const (
	DefaultIO                = IOAFXDP
	DefaultQueues            = 1
	DefaultFrameSize         = 0 // by the interfaces' MTUs: Dataplane.FrameSize
	DefaultFrameCount        = 4096
	DefaultRingSize          = 2048
	DefaultBatchSize         = 64
	DefaultXDPMode           = XDPAuto
	DefaultBusyPollUsecs     = 0 // off: docs/performance-log.md, "Busy polling, measured"
	MaxBusyPollUsecs         = 1000
	MaxBusyPollBudget        = 1024
	DefaultFastPath          = FastPathAuto
	DefaultFastPathFlows     = 1 << 18
	MaxFastPathFlows         = 1 << 22               // xdpprog.MaxFastFlows
	DefaultFastPathRefresh   = 5 * time.Second       // each handed-down flow passes one packet a refresh through a worker
	DefaultFlowHashSeed      = 0x5f1b_7a3c_9e2d_4b60 // any fixed value: what matters is that every instance uses the same one
	DefaultConntrackCapacity = 1 << 20
	DefaultTCPUnestablished  = conntrack.DefaultTCPUnestablished // the table's defaults: it owns them
	DefaultTCPUnconfirmed    = conntrack.DefaultTCPUnconfirmed
	DefaultTCPEstablished    = conntrack.DefaultTCPEstablished
	DefaultTCPClosing        = conntrack.DefaultTCPClosing
	DefaultUDPTimeout        = conntrack.DefaultUDP
	DefaultAdminListen       = "127.0.0.1:9180"
	DefaultAdminSocket       = "/run/vipd/admin.sock"
	DefaultProtocol          = TCP
	DefaultMode              = ModeNAT
	DefaultScheduler         = "maglev"
	DefaultTableSize         = 65537
	DefaultFlowHash          = Hash5Tuple
	DefaultEncap             = EncapIPIP
	DefaultOutlierWindow     = 10 * time.Second
	DefaultOutlierTimeout    = 3 * time.Second
	DefaultOutlierMin        = 20
	DefaultOutlierRatio      = 0.5
	DefaultBaseEjection      = 30 * time.Second
	DefaultMaxEjection       = 5 * time.Minute
	DefaultMaxEjectedPercent = 50
	DefaultGUEPort           = dsr.DefaultGUEPort // Katran's
	DefaultCheckType         = CheckTCP
	DefaultCheckPath         = "/"
	DefaultCheckInterval     = 2 * time.Second
	DefaultCheckTimeout      = 1 * time.Second
	DefaultRise              = 2
	DefaultFall              = 3
	DefaultOnAllDown         = AllDownDrop
	DefaultInitState         = InitDown
	DefaultWeight            = 1
	DefaultBackendState      = StateActive
	DefaultMinHealthy        = 1 // withdraw a VIP with no backend up
	DefaultPreviousOwnerTTL  = time.Hour
	DefaultStateFile         = "/var/lib/vipd/state.json"
	DefaultNeighborRole      = RoleActive
)

// DefaultKeepalivedState is where `vipd keepalived-notify` records the
// VRRP state keepalived last gave it, for `vipd keepalived-check` (not a
// key of the file: both commands take -state-file). It must outlive a
// stop of vipd.service, because the check puts a restarted vipd back in
// the role keepalived gave the box, and must not outlive a reboot, where a
// stale MASTER would make a second active box. So it lives on /run (a
// tmpfs) but outside /run/vipd, vipd.service's RuntimeDirectory=, which
// systemd removes on every stop (`go test -run TestKeepalivedStateSurvivesStop
// ./packaging`). RuntimeDirectoryPreserve=yes would keep /run/vipd too,
// but tie keepalived's record to a setting of vipd's unit that a drop-in
// or `systemctl clean` undoes; this directory belongs to no unit.
const DefaultKeepalivedState = "/run/vipd-keepalived/state"

// Default returns a Config with every default filled in and no VIPs.
func Default() Config {
	return Config{
		Dataplane: Dataplane{
			IO:                 DefaultIO,
			Queues:             DefaultQueues,
			FrameSize:          DefaultFrameSize,
			FrameCount:         DefaultFrameCount,
			RxRingSize:         DefaultRingSize,
			TxRingSize:         DefaultRingSize,
			FillRingSize:       DefaultRingSize,
			CompletionRingSize: DefaultRingSize,
			BatchSize:          DefaultBatchSize,
			XDPMode:            DefaultXDPMode,
			BusyPollUsecs:      DefaultBusyPollUsecs,
			FastPath:           DefaultFastPath,
			FastPathFlows:      DefaultFastPathFlows,
			FastPathFlows6:     DefaultFastPathFlows,
			FastPathRefresh:    Duration(DefaultFastPathRefresh),
			FlowHashSeed:       DefaultFlowHashSeed,
			StateFile:          DefaultStateFile,
			NeighborRole:       DefaultNeighborRole,
		},
		Conntrack: Conntrack{
			Capacity:         DefaultConntrackCapacity,
			TCPUnestablished: Duration(DefaultTCPUnestablished),
			TCPUnconfirmed:   Duration(DefaultTCPUnconfirmed),
			TCPEstablished:   Duration(DefaultTCPEstablished),
			TCPClosing:       Duration(DefaultTCPClosing),
			UDP:              Duration(DefaultUDPTimeout),
		},
		Admin: Admin{Listen: DefaultAdminListen, Socket: DefaultAdminSocket},
	}
}

func (v *VIP) setDefaults() {
	*v = VIP{
		Protocol:         DefaultProtocol,
		Mode:             DefaultMode,
		Scheduler:        DefaultScheduler,
		TableSize:        DefaultTableSize,
		FlowHash:         DefaultFlowHash,
		Encap:            DefaultEncap,
		GUEPort:          DefaultGUEPort,
		MinHealthy:       DefaultMinHealthy,
		PreviousOwnerTTL: Duration(DefaultPreviousOwnerTTL),
		LoadBound:        DefaultLoadBound,
		Outlier: Outlier{
			Window: Duration(DefaultOutlierWindow), Timeout: Duration(DefaultOutlierTimeout),
			MinHandshakes: DefaultOutlierMin, FailureRatio: DefaultOutlierRatio,
			BaseEjection: Duration(DefaultBaseEjection), MaxEjection: Duration(DefaultMaxEjection),
			MaxEjectedPercent: DefaultMaxEjectedPercent,
		},
		HealthCheck: HealthCheck{
			Type:      DefaultCheckType,
			Path:      DefaultCheckPath,
			Interval:  Duration(DefaultCheckInterval),
			Timeout:   Duration(DefaultCheckTimeout),
			Rise:      DefaultRise,
			Fall:      DefaultFall,
			OnAllDown: DefaultOnAllDown,
			InitState: DefaultInitState,
			// Backend-reported load (sched.go), off by default.
			LoadHeader: DefaultLoadHeader, LoadHalfLife: Duration(DefaultLoadHalfLife),
			ErrorPenalty: DefaultErrorPenalty, MinWeightPercent: DefaultMinWeightPercent,
		},
	}
}

func (b *Backend) setDefaults() {
	*b = Backend{Weight: DefaultWeight, State: DefaultBackendState}
}
