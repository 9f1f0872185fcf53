package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/admin/client"
)

// status prints /v1/state from the admin listener: the table (writeStatus),
// with -rate the rates per second (writeRates), with -stats the packets
// and bytes in and out (writeStats), with -json the document.
func status(args []string, stdout, stderr io.Writer) int {
	fs, addrFlag, cfgFlag := adminFlags("status", stderr)
	asJSON := fs.Bool("json", false, "print /v1/state as JSON")
	rate := fs.Bool("rate", false, "print rates per second, like ipvsadm -Ln --rate")
	stats := fs.Bool("stats", false, "print packets and bytes in and out, like ipvsadm -Ln --stats")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	addr, err := adminAddr(*addrFlag, *cfgFlag, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "vipd status: %v\n", err)
		return 1
	}
	st, err := client.FetchState(context.Background(), addr)
	if err != nil {
		fmt.Fprintf(stderr, "vipd status: %v\n", err)
		return 1
	}
	if *asJSON {
		return writeJSON(stdout, st)
	}
	if *stats {
		if writeStats(stdout, st) != nil {
			return 1
		}
		return 0
	}
	if *rate {
		if writeRates(stdout, st) != nil {
			return 1
		}
		return 0
	}
	if err := writeStatus(stdout, st); err != nil {
		return 1
	}
	return 0
}

// writeStatus prints st like `ipvsadm -Ln`: one line per VIP, one per
// backend with its weight, state and flows.
func writeStatus(w io.Writer, st *api.State) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "vipd %s  io %s  workers %d  config %s (loaded %s)  snapshot %d\n",
		st.Version, st.IO, st.Workers, st.ConfigFile, st.LoadedAt.Format(time.RFC3339), st.Generation)
	writeConfigNotice(tw, st)
	writeFleetLine(tw, st.Fleet)
	fast := "off"
	if st.FastPath {
		fast = "on"
	}
	role := ""
	if st.Role != "" {
		role = "  role " + st.Role
		if st.Role == api.RoleStandby {
			role += " (answers no ARP/NDP for its VIPs: vipd active)"
		}
	}
	fmt.Fprintf(tw, "conntrack %d/%d flows  XDP fast path %s%s\n", st.Conntrack.Entries, st.Conntrack.Capacity, fast, role)
	fmt.Fprintf(tw, "Prot\tVIP:Port\tMode\tScheduler\tFlags\t\t\t\t\t\t\t\n")
	fmt.Fprintf(tw, "  ->\tBackend:Port\tWeight\tForward\tHealth\tActiveFlows\tInAct\tNewFlows\tInPkts\tOutPkts\tAnswered/1m\tp50/p99\tWhy\n")
	for _, v := range st.VIPs {
		flags := v.FlowHash
		if v.AllDown {
			flags += ",ALL-DOWN(" + v.OnAllDown + ")"
		}
		if v.Announce != "" {
			flags += ",bgp " + v.Announce
		}
		if !v.PreviousUntil.IsZero() {
			flags += ",previous-owner until " + v.PreviousUntil.Format(time.RFC3339)
		}
		if q := v.QUICLB; q != nil {
			flags += ",quic-lb " + q.Summary()
		}
		sched := v.Scheduler
		if sched == "" {
			sched = "maglev"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s M=%d\t%s\t\t\t\t\t\t\t\n", strings.ToUpper(v.Protocol), api.HostPort(v.Address, v.Port), v.Mode, sched, v.TableSize, flags)
		for _, b := range v.Backends {
			fwd := b.Forwarding
			if b.Drained {
				fwd += "(drain)"
			}
			if b.SlowStart > 0 && b.SlowStart < 1 {
				fwd += fmt.Sprintf("(ramp %.0f%%)", 100*b.SlowStart)
			}
			if b.Load > 0 && b.Load < 1 {
				fwd += fmt.Sprintf("(load: weight %.0f%%)", 100*b.Load)
			}
			fwd += overrideMark(&b)
			why := b.LastError
			if why == "" && b.DrainReason != "" {
				why = "drained: " + b.DrainReason
			}
			if b.AwaitingCheck {
				why = "no new flows before its first health check"
			}
			if b.AtMaxFlows {
				why = fmt.Sprintf("at max_flows (%d of %d): no new flows until under %d", b.ActiveFlows, b.MaxFlows, b.MaxFlows*3/4)
			}
			if o := b.FleetOverride; o != nil {
				fwd += "(fleet " + o.What + ")"
				if why == "" {
					why = fleetWhy(o)
				}
			}
			port := b.Port
			if port == 0 {
				port = v.Port
			}
			answered, times := handshakeCells(b.Handshakes)
			if h := b.Handshakes; h != nil && h.Unanswered != "" {
				if why != "" {
					why += "; "
				}
				why += h.Unanswered
			}
			fmt.Fprintf(tw, "  ->\t%s\t%d\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", api.HostPort(b.Address, port), b.Weight, fwd, healthCell(b, time.Now()),
				b.ActiveFlows, b.InactiveFlows, b.NewFlows, b.Packets, count(b.OutPackets), answered, times, why)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeOverrides(w, st)
	writeBGP(w, st)
	return nil
}

// handshakeCells are a backend's Answered/1m and p50/p99 columns: the
// answered share of the handshakes judged over the last minute ("98% of
// 120"), and the handshake times ("1.2ms/8ms"); "-" without handshakes.
func handshakeCells(h *api.HandshakeState) (answered, times string) {
	if h == nil || h.Tried == 0 {
		answered = "-"
	} else {
		answered = fmt.Sprintf("%.0f%% of %d", 100*h.Share, h.Tried)
	}
	if h == nil || h.Timed == 0 {
		return answered, "-"
	}
	return answered, api.Seconds(h.P50Seconds) + "/" + api.Seconds(h.P99Seconds)
}

// healthCell is a backend's health with how long it has held at now
// ("down 3m12s"), the health alone before any check.
func healthCell(b api.BackendState, now time.Time) string {
	if b.StateSince.IsZero() {
		return b.Health
	}
	return b.Health + " " + now.Sub(b.StateSince).Round(time.Second).String()
}

// overrideMark is what vipd status adds to a backend's forwarding column
// for its override: "(weight 5*)", "(disabled*)"; the star is explained
// under the table (writeOverrides).
func overrideMark(b *api.BackendState) string {
	o := b.Override
	if o == nil {
		return ""
	}
	var s string
	if o.Weight != nil {
		s += fmt.Sprintf("(weight %d*)", *o.Weight)
	}
	if o.Disabled {
		s += "(disabled*)"
	}
	return s
}

// writeOverrides explains the overrides marked in the table, if any.
func writeOverrides(w io.Writer, st *api.State) {
	var n int
	for _, v := range st.VIPs {
		for _, b := range v.Backends {
			if b.Override != nil {
				n++
			}
		}
	}
	if n == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "* %d run-time override", n)
	if n > 1 {
		b.WriteString("s")
	}
	b.WriteString(" in force over the file (Weight is the file's): undo with vipd weight -reset, vipd enable\n")
	for _, v := range st.VIPs {
		for _, be := range v.Backends {
			if o := be.Override; o != nil && o.Reason != "" {
				fmt.Fprintf(&b, "  %s %s: %s\n", v.Name, api.HostPort(be.Address, be.Port), o.Reason)
			}
		}
	}
	io.WriteString(w, b.String())
}

// writeConfigNotice adds to status a line when the file on disk is not
// what runs, and the last reload's errors when it failed.
func writeConfigNotice(w io.Writer, st *api.State) {
	if st.ConfigDiffers {
		fmt.Fprintf(w, "config %s on disk differs from the running configuration: `vipd reload` applies it\n", st.ConfigFile)
	}
	if st.ConfigError != "" {
		fmt.Fprintln(w, "the last reload failed (the running configuration stays):")
		for l := range strings.Lines(st.ConfigError) {
			fmt.Fprintf(w, "  %s\n", strings.TrimRight(l, "\n"))
		}
	}
}

// writeBGP prints the speaker's peers, after the VIP table.
func writeBGP(w io.Writer, st *api.State) {
	b := st.BGP
	if b == nil {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	box := b.Box
	if b.Box == api.BoxDraining {
		box += fmt.Sprintf(" (everything withdrawn; forwarding until %s)", b.LingerUntil.Format(time.RFC3339))
	}
	fmt.Fprintf(tw, "\nBGP AS %d  router id %s  box %s\n", b.ASN, b.RouterID, box)
	fmt.Fprintf(tw, "Peer\tAS\tState\tSince\tLast error\n")
	for _, p := range b.Peers {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", p.Address, p.ASN, p.State, p.Since.Format(time.RFC3339), p.LastError)
	}
	tw.Flush()
}

// fleetWhy is the Why column of a backend with the fleet's override: who
// set it and why.
func fleetWhy(o *api.FleetOverride) string {
	s := "fleet " + o.What
	if o.By != "" {
		s += " by " + o.By
	}
	if !o.At.IsZero() {
		s += " at " + o.At.Format(time.RFC3339)
	}
	if o.Why != "" {
		s += ": " + o.Why
	}
	return s
}

// writeFleetLine adds to status what the box knows of its fleet: the
// revision it runs, and whether it is current, stale or refused one.
func writeFleetLine(w io.Writer, f *api.FleetState) {
	if f == nil {
		return
	}
	state := "current"
	switch {
	case f.FromCache:
		state = "STALE: started from its cache " + f.CacheFile + ", etcd not reached since"
	case f.Stale && !f.Connected:
		state = "STALE: etcd unreachable"
	case f.Stale:
		state = "STALE: etcd silent"
	}
	if f.Stale {
		state += fmt.Sprintf(" for %s; the box forwards with this revision", time.Duration(f.AgeSeconds*float64(time.Second)).Round(time.Second))
	}
	fmt.Fprintf(w, "fleet %s box %s: revision %d, %s\n", f.Prefix, f.Box, f.Revision, state)
	if f.EtcdError != "" {
		fmt.Fprintf(w, "  etcd: %s\n", f.EtcdError)
	}
	if f.Refused != 0 {
		fmt.Fprintf(w, "  revision %d refused (the box keeps %d): %s\n", f.Refused, f.Revision, f.RefusedWhy)
	}
	for _, s := range f.Ignored {
		fmt.Fprintf(w, "  ignored: %s\n", s)
	}
	if f.CacheErrors > 0 {
		fmt.Fprintf(w, "  the cache file %s cannot be written (%d failures): a start without etcd would run an older revision\n", f.CacheFile, f.CacheErrors)
	}
}
