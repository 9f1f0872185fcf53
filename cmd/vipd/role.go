package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/admin/client"
	"github.com/vipd/vipd/control/config"
)

// roleCmd is `vipd active` and `vipd standby`: it switches the box's
// neighbor role over the admin socket and prints the outcome. keepalived's
// notify script runs it on MASTER, BACKUP and FAULT.
func roleCmd(role string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vipd "+role, flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", "", "admin socket `path` (default: [admin] socket of -config, else "+config.DefaultAdminSocket+")")
	cfgPath := fs.String("config", "", "configuration `file` whose [admin] socket to use")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "usage: vipd %s [-socket PATH | -config FILE]\n", role)
		return 2
	}
	path, err := socketFor(*socket, "", *cfgPath, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "vipd %s: %v\n", role, err)
		return 1
	}
	ans, err := client.SetRole(context.Background(), path, role)
	if err != nil {
		fmt.Fprintf(stderr, "vipd %s: %v\n", role, err)
		return 1
	}
	writeRole(stdout, ans)
	return 0
}

// writeRole prints a role change as `vipd active` and `vipd standby` show
// it.
func writeRole(w io.Writer, a *api.RoleAnswer) {
	what := "answers ARP/NDP for %d VIP addresses (announced gratuitously when it became active)"
	if a.Role == api.RoleStandby {
		what = "forwards what reaches it; answers ARP/NDP for %d VIP addresses"
	}
	change := "was " + a.Previous
	if a.Previous == a.Role {
		change = "no change"
	}
	fmt.Fprintf(w, "%s since %s (%s): "+what+"\n", a.Role, a.Since.UTC().Format(time.RFC3339), change, a.Neighbors)
	if a.Routes != "" {
		fmt.Fprintf(w, "  BGP: %s\n", a.Routes)
	}
}
