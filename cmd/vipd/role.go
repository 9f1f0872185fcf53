package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/vipd/vipd/admin"
	"github.com/vipd/vipd/admin/client"
	"github.com/vipd/vipd/config"
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
	admin.WriteRole(stdout, ans)
	return 0
}
