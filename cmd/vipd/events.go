package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/admin/client"
)

// eventsCmd is vipd events: the last N events of vipd's event log (GET
// /v1/events), and with -f the new ones as they come, until interrupted.
func eventsCmd(args []string, stdout, stderr io.Writer) int {
	fs, addrFlag, cfgFlag := adminFlags("events", stderr)
	follow := fs.Bool("f", false, "follow: print new events as they come, until interrupted")
	n := fs.Int("n", 20, "print the last `N` events first (0: all vipd keeps)")
	asJSON := fs.Bool("json", false, "print each event as a JSON line")
	interval := fs.Duration("interval", time.Second, "with -f: how often to ask for new events")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 || *n < 0 || *interval <= 0 {
		fmt.Fprintln(stderr, "usage: vipd events [-f] [-n N] [-json] [-admin ADDR | -config FILE]")
		return 2
	}
	addr, err := adminAddr(*addrFlag, *cfgFlag, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "vipd events: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pr := func(e api.Event) {
		if *asJSON {
			writeJSONLine(stdout, e)
			return
		}
		fmt.Fprintln(stdout, formatEvent(e))
	}
	if err := printEvents(ctx, addr, *n, *follow, *interval, pr, stderr); err != nil {
		fmt.Fprintf(stderr, "vipd events: %v\n", err)
		return 1
	}
	return 0
}

// printEvents prints the last n events (0: all) of the admin server at
// addr, then, with follow, the new ones every interval until ctx ends;
// it says when events fell off the log before they could be printed.
func printEvents(ctx context.Context, addr string, n int, follow bool, interval time.Duration, pr func(api.Event), stderr io.Writer) error {
	ans, err := client.FetchEvents(ctx, addr, 0, n)
	if err != nil {
		return err
	}
	for _, e := range ans.Events {
		pr(e)
	}
	last := ans.Last
	t := time.NewTicker(interval)
	defer t.Stop()
	for follow {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		ans, err := client.FetchEvents(ctx, addr, last, 0)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if ans.Missed > 0 {
			fmt.Fprintf(stderr, "vipd events: %d events fell off vipd's log before they could be printed\n", ans.Missed)
		}
		for _, e := range ans.Events {
			pr(e)
		}
		last = max(last, ans.Last)
	}
	return nil
}

// formatEvent is an event in a line: time, kind, what it is about, what
// happened, who and why.
func formatEvent(e api.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %-8s", e.Time.Local().Format("2006-01-02 15:04:05.000"), e.Kind)
	if e.VIP != "" || e.Backend != "" {
		b.WriteString("  " + strings.TrimSpace(e.VIP+" "+e.Backend))
	}
	b.WriteString("  " + e.What)
	if e.By != "" {
		b.WriteString("  by " + e.By)
	}
	if e.Reason != "" {
		b.WriteString("  (" + e.Reason + ")")
	}
	return b.String()
}

// writeJSONLine writes v as one line of JSON.
func writeJSONLine(w io.Writer, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	w.Write(append(b, '\n'))
}
