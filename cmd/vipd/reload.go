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

// reload asks the running vipd to reload its file, over the admin socket,
// and prints what changed or every reason it was refused: exit 0 when it
// applied, 1 when refused or vipd could not be asked.
func reload(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vipd reload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", "", "admin socket `path` (default: [admin] socket of -config, else "+config.DefaultAdminSocket+")")
	cfgPath := fs.String("config", "", "configuration `file` whose [admin] socket to use")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: vipd reload [-socket PATH | -config FILE]")
		return 2
	}
	path, err := socketFor(*socket, "", *cfgPath, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "vipd reload: %v\n", err)
		return 1
	}
	res, err := client.Reload(context.Background(), path)
	if err != nil {
		fmt.Fprintf(stderr, "vipd reload: %v\n", err)
		return 1
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	if !res.OK {
		admin.WriteReload(stderr, res)
		return 1
	}
	admin.WriteReload(stdout, res)
	return 0
}
