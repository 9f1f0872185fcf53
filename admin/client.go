package admin

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vipd/vipd/admin/api"
)

// WriteStatus prints st like `ipvsadm -Ln`: one line per VIP, one per
// backend with its weight, state and flows.
func WriteStatus(w io.Writer, st *api.State) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "vipd %s  io %s  workers %d  config %s (loaded %s)  snapshot %d\n",
		st.Version, st.IO, st.Workers, st.ConfigFile, st.LoadedAt.Format(time.RFC3339), st.Generation)
	writeConfigNotice(tw, st)
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
	fmt.Fprintf(tw, "Prot\tVIP:Port\tMode\tScheduler\tFlags\t\t\t\n")
	fmt.Fprintf(tw, "  ->\tBackend:Port\tWeight\tForward\tHealth\tActiveFlows\tNewFlows\tPackets\tWhy\n")
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s M=%d\t%s\t\t\t\n", strings.ToUpper(v.Protocol), api.HostPort(v.Address, v.Port), v.Mode, sched, v.TableSize, flags)
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
			port := b.Port
			if port == 0 {
				port = v.Port
			}
			fmt.Fprintf(tw, "  ->\t%s\t%d\t%s\t%s\t%d\t%d\t%d\t%s\n", api.HostPort(b.Address, port), b.Weight, fwd, healthCell(b, time.Now()), b.ActiveFlows, b.NewFlows, b.Packets, b.LastError)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeOverrides(w, st)
	writeBGP(w, st)
	return nil
}
