package config

import (
	"fmt"
	"io"
	"net/netip"
	"strings"
	"text/tabwriter"
)

// WriteSummary prints a readable overview of cfg: the dataplane, then every
// VIP with its backends, in the spirit of `ipvsadm -Ln`.
func WriteSummary(w io.Writer, cfg *Config) error {
	d := &cfg.Dataplane
	arms := "one-armed"
	if d.TwoArmed() {
		arms = "two-armed"
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	busy := ""
	if d.BusyPollUsecs > 0 && d.IO == IOAFXDP {
		busy = fmt.Sprintf(", busy poll %dµs budget %d", d.BusyPollUsecs, d.BusyPollBatch())
	}
	if d.FastPath != FastPathOff && d.IO == IOAFXDP {
		busy += fmt.Sprintf(", XDP fast path %s: %d IPv4 + %d IPv6 flows refreshed every %s", d.FastPath, d.FastPathFlows, d.FastPathFlows6, d.FastPathRefresh)
	}
	fmt.Fprintf(tw, "dataplane: %s, ingress %s, egress %s, io %s, %d queue(s), batch %d%s\n",
		arms, d.Ingress, d.EgressInterface(), d.IO, d.Queues, d.BatchSize, busy)
	mtu := "from interface"
	if d.EgressMTU != 0 {
		mtu = fmt.Sprint(d.EgressMTU)
	}
	fmt.Fprintf(tw, "conntrack: %d flows; timeouts tcp %s/%s/%s/%s (unestablished/unconfirmed/established/closing), udp %s\n",
		cfg.Conntrack.Capacity, cfg.Conntrack.TCPUnestablished, cfg.Conntrack.TCPUnconfirmed,
		cfg.Conntrack.TCPEstablished, cfg.Conntrack.TCPClosing, cfg.Conntrack.UDP)
	admin := "disabled"
	if cfg.Admin.Listen != "" {
		admin = cfg.Admin.Listen + " (read-only)"
		if len(cfg.Admin.AllowedHosts) > 0 {
			admin = cfg.Admin.Listen + " (read-only; hosts: IP addresses, localhost, " + strings.Join(cfg.Admin.AllowedHosts, ", ") + ")"
		}
	}
	socket := "disabled (no drains)"
	if cfg.Admin.Socket != "" {
		socket = cfg.Admin.Socket
		if cfg.Admin.Pprof {
			socket += " (with /debug/pprof/)"
		}
	}
	fmt.Fprintf(tw, "egress mtu: %s; admin: %s; admin socket: %s\n", mtu, admin, socket)
	if b := cfg.BGP; b != nil {
		rid := "egress interface address"
		if b.RouterID.IsValid() {
			rid = b.RouterID.String()
		}
		gr := "off"
		if b.GracefulRestart > 0 {
			gr = b.GracefulRestart.String()
		}
		fmt.Fprintf(tw, "bgp: AS %d, router id %s, hold %s, keepalive %s, graceful restart %s, linger %s, drain on stop %v\n",
			b.ASN, rid, b.HoldTime, b.Keepalive, gr, b.Linger, b.DrainOnStop)
		for _, p := range b.Peers {
			mode := "active"
			if p.Passive {
				mode = "passive"
			}
			fmt.Fprintf(tw, "  peer %s AS %d port %d %s%s%s families %v\n", p.Address, p.ASN, p.Port, mode,
				map[bool]string{true: ", md5"}[p.Password != ""],
				map[bool]string{true: fmt.Sprintf(", multihop ttl %d", p.MultihopTTL)}[p.MultihopTTL > 0], p.Families)
		}
	}
	if f := cfg.Fleet; f != nil {
		auth := ""
		if f.CertFile != "" {
			auth += ", client certificate"
		}
		if f.User != "" {
			auth += ", user " + f.User
		}
		fmt.Fprintf(tw, "fleet: %s on %s, box %s, cache %s, dial timeout %s%s; seed and VIPs from the fleet\n",
			f.Prefix, strings.Join(f.Endpoints, " "), f.Box, f.CacheFile, f.DialTimeout, auth)
	}
	backends := 0
	for i := range cfg.VIPs {
		v := &cfg.VIPs[i]
		backends += len(v.Backends)
		port := fmt.Sprint(v.Port)
		if v.Port == 0 {
			port = "*"
		}
		sched := v.Scheduler
		if v.Scheduler == SchedMaglevBounded {
			sched += fmt.Sprintf(" (bound %g)", v.LoadBound)
		}
		fmt.Fprintf(tw, "\nVIP %s\t%s:%s/%s\tmode %s\t%s M=%d\thash %s\n",
			v.Name, bracket(v.Address), port, v.Protocol, v.Mode, sched, v.TableSize, v.FlowHash)
		if v.Mode == ModeDSR {
			src := "egress interface address"
			if v.EncapSource.IsValid() {
				src = v.EncapSource.String()
			}
			switch {
			case v.Encap == EncapGUE:
				fmt.Fprintf(tw, "  encap gue to port %d (source port per flow), source %s\n", v.GUEPort, src)
			case v.EncapSourcePrefix.IsValid():
				fmt.Fprintf(tw, "  encap ipip, source per flow from %s\n", v.EncapSourcePrefix)
			default:
				fmt.Fprintf(tw, "  encap ipip, source %s\n", src)
			}
			if v.HintsPreviousOwner() {
				udp := ""
				if v.PreviousOwnerUDP {
					udp = ", UDP too"
				}
				fmt.Fprintf(tw, "  previous-owner hints for %s after a backend change%s (backends: vipd-decap -chain -chain-peers)\n", v.PreviousOwnerTTL, udp)
			}
		}
		if v.Announced() || !v.AnswersNeighbors() {
			fmt.Fprintf(tw, "  bgp announce %v (min healthy %d, med %d, communities %v), arp/ndp %v\n",
				v.Announced(), v.MinHealthy, v.MED, v.Communities, v.AnswersNeighbors())
		}
		h := &v.HealthCheck
		switch h.Type {
		case CheckNone:
			fmt.Fprintf(tw, "  healthcheck none\n")
		default:
			target := h.Type
			if h.Type == CheckHTTP {
				target += " " + CheckType(h.Path)
			}
			via := "each backend's address"
			if h.Probe == ProbeTunnel {
				via = "VIP through each backend's tunnel"
			}
			fmt.Fprintf(tw, "  healthcheck %s every %s, timeout %s, rise %d, fall %d, slow start %s, all down: %s, probe %s (%s)\n",
				target, h.Interval, h.Timeout, h.Rise, h.Fall, h.SlowStart, h.OnAllDown, h.Probe, via)
			if h.LoadReport {
				fmt.Fprintf(tw, "  load report from header %s, half-life %s, error penalty %g, weight at least %d%%\n",
					h.LoadHeader, h.LoadHalfLife, h.ErrorPenalty, h.MinWeightPercent)
			}
		}
		fmt.Fprintf(tw, "  -> backend\tweight\tstate\n")
		for _, b := range v.Backends {
			bp := port // no rewrite: the client's destination port
			if b.Port != 0 {
				bp = fmt.Sprint(b.Port)
			}
			fmt.Fprintf(tw, "  -> %s:%s\t%d\t%s\n", bracket(b.Address), bp, b.Weight, b.State)
		}
	}
	fmt.Fprintf(tw, "\n%d VIP(s), %d backend(s)\n", len(cfg.VIPs), backends)
	return tw.Flush()
}

func bracket(a netip.Addr) string {
	if a.Is6() {
		return "[" + a.String() + "]"
	}
	return a.String()
}
