package daemon

import (
	"context"
	"net/netip"

	"github.com/vipd/vipd/config"
	"github.com/vipd/vipd/control"
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
	// snapshot is published: the VIP addresses (to steer to vipd and
	// answer ARP for; new ones get announced), the NAT reply sources (to
	// steer to vipd) and the next hops to keep resolved.
	Apply(s Steering) error
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

// ReplyKey names the source of NAT replies: packets from (Addr, Proto,
// Port) are replies to translate; Port 0 means any port.
type ReplyKey struct {
	Addr  netip.Addr
	Proto uint8
	Port  uint16
}

// Steering is what a snapshot serves, as the platform needs it.
type Steering struct {
	VIPs     []netip.Addr
	Replies  []ReplyKey
	NextHops []netip.Addr // backend addresses
}

// steeringOf extracts the Steering of a spec.
func steeringOf(spec *dataplane.Spec) Steering {
	var s Steering
	seenVIP := map[netip.Addr]bool{}
	seenHop := map[netip.Addr]bool{}
	seenReply := map[ReplyKey]bool{}
	for _, v := range spec.VIPs {
		if !seenVIP[v.Addr] {
			seenVIP[v.Addr] = true
			s.VIPs = append(s.VIPs, v.Addr)
		}
		for _, b := range v.Backends {
			if !seenHop[b.Addr] {
				seenHop[b.Addr] = true
				s.NextHops = append(s.NextHops, b.Addr)
			}
			if v.Mode != dataplane.ModeNAT {
				continue
			}
			k := ReplyKey{b.Addr, v.Proto, b.Port}
			if b.Port == 0 {
				k.Port = v.Port
			}
			if !seenReply[k] {
				seenReply[k] = true
				s.Replies = append(s.Replies, k)
			}
		}
	}
	return s
}
