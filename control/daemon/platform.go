package daemon

import (
	"context"
	"net/netip"

	"github.com/vipd/vipd/control"
	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/dataplane"
)

// Platform is the daemon's access to the host.
type Platform interface {
	// OpenQueues opens one dataplane queue per worker.
	OpenQueues(dp *config.Dataplane) ([]dataplane.Queue, error)
	// Host returns what the kernel knows that a snapshot needs. It is
	// called for every snapshot and must not block.
	Host() control.Host
	// Apply hands the platform what the new snapshot serves, before the
	// snapshot is published: the VIP addresses (to steer to vipd), the
	// NAT reply sources (to steer to vipd) and the next hops to keep
	// resolved.
	Apply(s Steering) error
	// SetNeighborVIPs sets the VIP addresses to answer ARP/NDP for (new
	// ones get announced gratuitously): the steered VIPs whose
	// neighbor_announce is on. Called before the snapshot that serves
	// them is published, whenever the set changes; it must not block.
	SetNeighborVIPs(addrs []netip.Addr)
	// Run does the platform's background work (ARP, neighbor resolution,
	// interface watching) until ctx is done, calling changed whenever
	// Host would answer differently.
	Run(ctx context.Context, changed func()) error
	// DriverStats returns the drivers' counters by name, summed.
	DriverStats() map[string]uint64
	// Close undoes everything the platform installed (XDP program, ...).
	// Called after the workers have stopped.
	Close() error
}

// reloadChecker is a Platform that checks a configuration against the
// host before a reload takes it (LinuxPlatform: the AF_PACKET host check).
type reloadChecker interface {
	CheckReload(cfg *config.Config) error
}

// ReplyKey names the source of NAT replies (see dataplane.ReplyKey).
type ReplyKey = dataplane.ReplyKey

// Steering is what a snapshot serves, as the platform needs it (see
// dataplane.Steering).
type Steering = dataplane.Steering

// steeringOf extracts the Steering of a spec.
func steeringOf(spec *dataplane.Spec) Steering { return spec.Steering() }
