package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/vipd/vipd/control/admin/api"
)

// writeStats prints st's counters like `ipvsadm -Ln --stats`: per VIP and
// backend, the new flows (Conns), the packets and bytes from clients
// (InPkts, InBytes) and the replies relayed to them (OutPkts, OutBytes).
// A DSR VIP's replies go from its backends to the clients, past vipd:
// their columns say "-", and a note under the table why.
func writeStats(w io.Writer, st *api.State) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "Prot\tVIP:Port\tConns\tInPkts\tOutPkts\tInBytes\tOutBytes\t\n")
	fmt.Fprintf(tw, "  ->\tBackend:Port\t\t\t\t\t\t\n")
	dsr := false
	for _, v := range st.VIPs {
		dsr = dsr || v.OutPackets == nil
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%d\t%s\t\n", strings.ToUpper(v.Protocol), api.HostPort(v.Address, v.Port),
			v.NewFlows, v.Packets, count(v.OutPackets), v.Bytes, count(v.OutBytes))
		for _, b := range v.Backends {
			port := b.Port
			if port == 0 {
				port = v.Port
			}
			fmt.Fprintf(tw, "  ->\t%s\t%d\t%d\t%s\t%d\t%s\t\n", api.HostPort(b.Address, port),
				b.NewFlows, b.Packets, count(b.OutPackets), b.Bytes, count(b.OutBytes))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if dsr {
		_, err := fmt.Fprintln(w, "Out \"-\": a DSR VIP's backends answer their clients directly; vipd does not see the replies.")
		return err
	}
	return nil
}

// count is a counter vipd may not see: "-" when it does not (nil).
func count(n *uint64) string {
	if n == nil {
		return "-"
	}
	return strconv.FormatUint(*n, 10)
}
