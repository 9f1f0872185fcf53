package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/admin/client"
	"github.com/vipd/vipd/control/config"
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
		writeReload(stderr, res)
		return 1
	}
	writeReload(stdout, res)
	return 0
}

// writeReload prints what a reload changed, one line each, or, refused,
// every reason.
func writeReload(w io.Writer, r *api.ReloadResult) {
	if !r.OK {
		fmt.Fprintf(w, "reload of %s refused: the running configuration stays\n", r.File)
		for _, e := range r.Errors {
			fmt.Fprintf(w, "  %s\n", e)
		}
		return
	}
	n := len(r.VIPsAdded) + len(r.VIPsRemoved) + len(r.BackendsAdded) + len(r.BackendsRemoved) + len(r.Reweighted) + len(r.Changed)
	if n == 0 {
		fmt.Fprintf(w, "reloaded %s: nothing changed\n", r.File)
		return
	}
	fmt.Fprintf(w, "reloaded %s:\n", r.File)
	writeChanges(w, r)
}

// writeChanges prints what r says changed, a line each: + added, -
// removed, ~ changed.
func writeChanges(w io.Writer, r *api.ReloadResult) {
	for _, v := range r.VIPsAdded {
		fmt.Fprintf(w, "  + vip %q\n", v)
	}
	for _, v := range r.VIPsRemoved {
		fmt.Fprintf(w, "  - vip %q\n", v)
	}
	for _, b := range r.BackendsAdded {
		fmt.Fprintf(w, "  + backend %s of vip %q\n", b.Backend, b.VIP)
	}
	for _, b := range r.BackendsRemoved {
		fmt.Fprintf(w, "  - backend %s of vip %q\n", b.Backend, b.VIP)
	}
	for _, rw := range r.Reweighted {
		fmt.Fprintf(w, "  ~ backend %s of vip %q weight %d → %d\n", rw.Backend, rw.VIP, rw.Old, rw.New)
	}
	for _, c := range r.Changed {
		fmt.Fprintf(w, "  ~ %s\n", c)
	}
}
