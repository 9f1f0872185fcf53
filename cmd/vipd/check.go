package main

import (
	"errors"
	"fmt"
	"io"
	"net/netip"

	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/health/tunprobe"
	"github.com/vipd/vipd/internal/linkwatch"
)

// localAddrs reads this machine's addresses, readLink an interface; tests
// replace them.
var (
	localAddrs = linkwatch.LocalAddrs
	readLink   = linkwatch.Read
)

// rpFilter checks the egress interface's reverse-path filter for tunnel
// health probes; tests replace it.
var rpFilter = tunprobe.CheckRPFilter

// checkHost is the part of -check that looks at the machine it runs on: a
// VIP that is one of its addresses is an error (vipd would refuse to start
// with it, see docs/operations.md), and so is strict reverse-path filtering on the
// egress interface when IPv4 DSR backends are probed through their tunnels
// (vipd would refuse to start: the answers come from the VIP); a flow-hash
// seed left at the public default is a warning. It returns false when
// there is an error.
func checkHost(cfg *config.Config, stdout, stderr io.Writer) bool {
	ok := true
	if local, err := localAddrs(); err != nil {
		fmt.Fprintf(stderr, "warning: could not read this machine's addresses (%v): not checked whether a VIP is one of them\n", err)
	} else {
		own := map[netip.Addr]bool{}
		for _, a := range local {
			own[a.Unmap()] = true
		}
		for _, v := range cfg.VIPs {
			if own[v.Address.Unmap()] {
				fmt.Fprintf(stderr, "vipd: vip %q: %v is one of this machine's own addresses; vipd would take every packet to it (SSH and BGP to the box included): remove it from the interface, or give the VIP another address\n", v.Name, v.Address)
				ok = false
			}
		}
	}
	if b := cfg.BGP; b != nil && !b.RouterID.IsValid() {
		// The router ID defaults to an IPv4 address of the egress
		// interface: without one the speaker cannot start.
		egress := cfg.Dataplane.EgressInterface()
		if l, err := readLink(egress); err != nil {
			fmt.Fprintf(stderr, "warning: could not read interface %s (%v): not checked that it has an IPv4 address for the BGP router ID\n", egress, err)
		} else if !hasIPv4(l) {
			fmt.Fprintf(stderr, "vipd: bgp: no router_id is set and the egress interface %s has no IPv4 address to take it from: set [bgp] router_id\n", egress)
			ok = false
		}
	}
	for _, v := range cfg.VIPs {
		if v.Mode == config.ModeDSR && v.HealthCheck.Type != config.CheckNone && v.HealthCheck.Probe == config.ProbeTunnel && v.Address.Is4() {
			egress := cfg.Dataplane.EgressInterface()
			if err := rpFilter(egress); errors.Is(err, tunprobe.ErrRPFilter) {
				fmt.Fprintf(stderr, "vipd: vip %q: probe = \"tunnel\": %v\n", v.Name, err)
				ok = false
			} else if err != nil {
				fmt.Fprintf(stderr, "warning: could not read the reverse-path filter of %s (%v): not checked whether tunnel health probes can work\n", egress, err)
			}
			break // one check covers every VIP
		}
	}
	// With [fleet] the seed is the fleet's, not this file's.
	if cfg.Dataplane.FlowHashSeed == config.DefaultFlowHashSeed && cfg.Fleet == nil {
		fmt.Fprintln(stderr, "warning: dataplane.flow_hash_seed is the public default: anyone can compute which backend each of their flows gets; set a seed of your own (the same on every vipd that serves these VIPs)")
	}
	return ok
}

func hasIPv4(l linkwatch.Link) bool {
	for _, p := range l.Addrs {
		if p.Addr().Is4() {
			return true
		}
	}
	return false
}
