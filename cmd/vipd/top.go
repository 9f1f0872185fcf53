package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/admin/client"
)

// clearScreen moves the cursor home and clears the terminal (ANSI).
const clearScreen = "\x1b[H\x1b[2J"

// top redraws the rates of /v1/state every -interval until Ctrl-C, or -n
// times.
func top(args []string, stdout, stderr io.Writer) int {
	fs, addrFlag, cfgFlag := adminFlags("top", stderr)
	n := fs.Int("n", 0, "stop after `N` frames (0: until Ctrl-C)")
	interval := fs.Duration("interval", time.Second, "time between frames")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 || *interval <= 0 {
		fmt.Fprintln(stderr, "usage: vipd top [-n N] [-interval D] [-admin ADDR | -config FILE]")
		return 2
	}
	addr, err := adminAddr(*addrFlag, *cfgFlag, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "vipd top: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t := time.NewTicker(*interval)
	defer t.Stop()
	for i := 0; *n == 0 || i < *n; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return 0
			case <-t.C:
			}
		}
		st, err := client.FetchState(ctx, addr)
		if err != nil {
			if ctx.Err() != nil {
				return 0
			}
			fmt.Fprintf(stderr, "vipd top: %v\n", err)
			return 1
		}
		fmt.Fprint(stdout, clearScreen)
		if err := writeTop(stdout, st, time.Now()); err != nil {
			return 1
		}
	}
	return 0
}

// writeTop is one frame of vipd top: the header of vipd status, the rates
// and the workers.
func writeTop(w io.Writer, st *api.State, now time.Time) error {
	fmt.Fprintf(w, "vipd %s  %s  io %s  workers %d  conntrack %d/%d flows  snapshot %d\n\n",
		st.Version, now.Format("15:04:05"), st.IO, st.Workers, st.Conntrack.Entries, st.Conntrack.Capacity, st.Generation)
	if err := writeRates(w, st); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return writeWorkers(w, st)
}

// writeRates prints st's rates like `ipvsadm -Ln --rate`: per VIP and
// backend, new flows, packets (from clients, and NAT replies: "-" for DSR,
// whose replies vipd does not see) and bytes per second and the active
// flows, and per backend its handshakes' answered share and times.
func writeRates(w io.Writer, st *api.State) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "Prot\tVIP:Port\tConnPS\tPktPS\tOutPktPS\tBytePS\tActiveFlows\tAnswered/1m\tp50/p99\t\n")
	fmt.Fprintf(tw, "  ->\tBackend:Port\t\t\t\t\t\t\t\t\n")
	for _, v := range st.VIPs {
		r := v.Rates
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t\t\t\n", strings.ToUpper(v.Protocol), api.HostPort(v.Address, v.Port),
			perSec(r.NewFlowsPerSec), perSec(r.PacketsPerSec), outPerSec(r.OutPacketsPerSec), perSec(r.BytesPerSec), v.ActiveFlows)
		for _, b := range v.Backends {
			port := b.Port
			if port == 0 {
				port = v.Port
			}
			r := b.Rates
			answered, times := handshakeCells(b.Handshakes)
			fmt.Fprintf(tw, "  ->\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t\n", api.HostPort(b.Address, port),
				perSec(r.NewFlowsPerSec), perSec(r.PacketsPerSec), outPerSec(r.OutPacketsPerSec), perSec(r.BytesPerSec), b.ActiveFlows, answered, times)
		}
	}
	return tw.Flush()
}

// writeWorkers prints each worker's rates: received and sent packets per
// second and its drops per second by reason.
func writeWorkers(w io.Writer, st *api.State) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Worker\tRxPPS\tTxPPS\tDrops/s\n")
	for _, ws := range st.WorkersDetail {
		reasons := make([]string, 0, len(ws.DropsPerSec))
		for r := range ws.DropsPerSec {
			reasons = append(reasons, r)
		}
		sort.Strings(reasons)
		var drops []string
		for _, r := range reasons {
			drops = append(drops, r+" "+perSec(ws.DropsPerSec[r]))
		}
		d := strings.Join(drops, ", ")
		if d == "" {
			d = "0"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", ws.Queue, perSec(ws.RxPerSec), perSec(ws.TxPerSec), d)
	}
	return tw.Flush()
}

// perSec is a rate rounded as ipvsadm prints it, with K, M and G above a
// thousand.
func perSec(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.1fG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.1fK", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

// outPerSec is a rate of replies vipd may not see: "-" when it does not.
func outPerSec(r *float64) string {
	if r == nil {
		return "-"
	}
	return perSec(*r)
}
