package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/admin/client"
)

const connsUsage = "usage: vipd conns [-client ADDR[:PORT]] [-backend ADDR[:PORT]] [-limit N] [-json] [-admin ADDR | -config FILE] [VIP]"

// conns lists the pinned flows, like ipvsadm -Lnc. The VIP may come
// before or after the flags.
func conns(args []string, stdout, stderr io.Writer) int {
	fs, addrFlag, cfgFlag := adminFlags("conns", stderr)
	from := fs.String("client", "", "only flows from this client `addr[:port]`")
	backend := fs.String("backend", "", "only flows pinned to this backend `addr[:port]`")
	limit := fs.Int("limit", api.DefaultConnsLimit, fmt.Sprintf("show at most `N` flows (at most %d)", api.MaxConnsLimit))
	asJSON := fs.Bool("json", false, "print the answer of GET /v1/conns as JSON")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var vip string
	if fs.NArg() > 0 {
		vip = fs.Arg(0)
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			return 2
		}
	}
	if fs.NArg() > 0 || *limit < 1 || *limit > api.MaxConnsLimit {
		fmt.Fprintln(stderr, connsUsage)
		return 2
	}
	addr, err := adminAddr(*addrFlag, *cfgFlag, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "vipd conns: %v\n", err)
		return 1
	}
	c, err := client.FetchConns(context.Background(), addr, api.ConnsQuery{VIP: vip, Client: *from, Backend: *backend, Limit: *limit})
	if err != nil {
		fmt.Fprintf(stderr, "vipd conns: %v\n", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(c); err != nil {
			fmt.Fprintf(stderr, "vipd conns: %v\n", err)
			return 1
		}
		return 0
	}
	if err := writeConns(stdout, c); err != nil {
		fmt.Fprintf(stderr, "vipd conns: %v\n", err)
		return 1
	}
	return 0
}

// writeConns prints c like `ipvsadm -Lnc`: one line per flow.
func writeConns(w io.Writer, c *api.Conns) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROTO\tCLIENT\tVIP\tBACKEND\tSTATE\tAGE\tIDLE\tFAST\tPREVIOUS")
	for _, x := range c.Conns {
		prev := x.Previous
		if prev == "" {
			prev = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s %s\t%s\t%s\t%s\t%s\t%s\t%s\n", x.Protocol, x.Client, x.VIP, x.VIPAddress,
			x.Backend, x.State, time.Duration(x.AgeSeconds)*time.Second, time.Duration(x.IdleSeconds)*time.Second, x.FastPath, prev)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if c.Truncated {
		_, err := fmt.Fprintf(w, "(%d flows shown: the limit; more match. -limit N shows up to %d)\n", len(c.Conns), api.MaxConnsLimit)
		return err
	}
	_, err := fmt.Fprintf(w, "(%d flows)\n", len(c.Conns))
	return err
}
