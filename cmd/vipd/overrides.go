package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/admin/client"
	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/control/fleet"
)

// Run-time overrides: vipd weight, vipd disable and vipd enable, through
// the admin socket like vipd drain, so that an operator can take a
// backend out or change its share at once, without editing the file and
// reloading.

// overrideFlags are the flags of the override commands: where the admin
// socket is.
func overrideFlags(name string, stderr io.Writer) (fs *flag.FlagSet, socket, addr, cfgPath *string, ff fleetFlags) {
	fs = flag.NewFlagSet("vipd "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket = fs.String("socket", "", "admin socket `path` (default: [admin] socket of -config, else "+config.DefaultAdminSocket+")")
	cfgPath = fs.String("config", "", "configuration `file` whose [admin] socket to use")
	addr = fs.String("admin", "", "the admin socket's `path`, like -socket (overrides are not served over TCP)")
	ff = addFleetFlags(fs)
	return fs, socket, addr, cfgPath, ff
}

// parseAnywhere parses fs's flags wherever they are among the arguments
// (vipd weight VIP BACKEND -reset) and returns the other arguments.
func parseAnywhere(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

const (
	fleetUsage   = " [-reason TEXT] [-fleet [-wait]]"
	weightUsage  = "usage: vipd weight [-socket PATH | -config FILE]" + fleetUsage + " VIP BACKEND N|-reset"
	disableUsage = "usage: vipd disable [-socket PATH | -config FILE]" + fleetUsage + " VIP BACKEND"
	enableUsage  = "usage: vipd enable [-socket PATH | -config FILE]" + fleetUsage + " VIP BACKEND"
)

// weightCmd is vipd weight: a weight override, or its end (-reset).
func weightCmd(args []string, stdout, stderr io.Writer) int {
	fs, socket, addr, cfgPath, ff := overrideFlags("weight", stderr)
	reset := fs.Bool("reset", false, "end the override: the file's weight is in force again")
	pos, err := parseAnywhere(fs, args)
	if err != nil {
		return 2
	}
	req := api.OverrideRequest{ResetWeight: *reset}
	switch {
	case *reset && len(pos) == 2:
	case !*reset && len(pos) == 3:
		n, err := strconv.ParseUint(pos[2], 10, 32)
		if err != nil || n > config.MaxWeight {
			fmt.Fprintf(stderr, "vipd weight: weight %q: want 0 to %d (0 takes no new flows)\n", pos[2], config.MaxWeight)
			return 2
		}
		w := uint32(n)
		req.Weight = &w
	default:
		fmt.Fprintln(stderr, weightUsage)
		return 2
	}
	if !ff.check("weight", stderr) {
		return 2
	}
	if *ff.on {
		change := fleetChange{set: &fleet.Override{Weight: req.Weight}}
		if *reset {
			change = fleetChange{undo: "weight"}
		}
		return fleetOverride("weight", ff, *cfgPath, pos[0], pos[1], change, stdout, stderr)
	}
	req.VIP, req.Backend, req.Reason = pos[0], pos[1], *ff.reason
	ans, code := sendOverride("weight", req, *socket, *addr, *cfgPath, stderr)
	if ans == nil {
		return code
	}
	switch o := ans.Override; {
	case o != nil && o.Weight != nil:
		fmt.Fprintf(stdout, "%s %s: weight %d in force (the file says %d) until vipd weight -reset %s %s\n",
			ans.VIP, ans.Backend, *o.Weight, ans.FileWeight, ans.VIP, ans.Backend)
	default:
		fmt.Fprintf(stdout, "%s %s: the file's weight %d is in force\n", ans.VIP, ans.Backend, ans.FileWeight)
	}
	printNote(stdout, ans)
	return 0
}

// disableCmd is vipd disable (disable true) and vipd enable (false).
func disableCmd(args []string, stdout, stderr io.Writer, disable bool) int {
	name, usage := "enable", enableUsage
	if disable {
		name, usage = "disable", disableUsage
	}
	fs, socket, addr, cfgPath, ff := overrideFlags(name, stderr)
	pos, err := parseAnywhere(fs, args)
	if err != nil {
		return 2
	}
	if len(pos) != 2 || !ff.check(name, stderr) {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	if *ff.on {
		change := fleetChange{set: &fleet.Override{Disabled: true}}
		if !disable {
			change = fleetChange{undo: "disabled"}
		}
		return fleetOverride(name, ff, *cfgPath, pos[0], pos[1], change, stdout, stderr)
	}
	req := api.OverrideRequest{VIP: pos[0], Backend: pos[1], Disabled: &disable, Reason: *ff.reason}
	ans, code := sendOverride(name, req, *socket, *addr, *cfgPath, stderr)
	if ans == nil {
		return code
	}
	if disable {
		fmt.Fprintf(stdout, "%s %s: disabled, it takes no flows, until vipd enable %s %s\n", ans.VIP, ans.Backend, ans.VIP, ans.Backend)
	} else {
		fmt.Fprintf(stdout, "%s %s: enabled (the file says state = %q)\n", ans.VIP, ans.Backend, ans.FileState)
	}
	printNote(stdout, ans)
	return 0
}

// sendOverride sends req to the admin socket the flags name; on failure
// it says why and returns a nil answer and the exit status.
func sendOverride(name string, req api.OverrideRequest, socket, addr, cfgPath string, stderr io.Writer) (*api.OverrideAnswer, int) {
	path, err := socketFor(socket, addr, cfgPath, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "vipd %s: %v\n", name, err)
		return nil, 1
	}
	ans, err := client.SetOverride(context.Background(), path, req)
	if err != nil {
		fmt.Fprintf(stderr, "vipd %s: %v\n", name, err)
		return nil, 1
	}
	return ans, 0
}

func printNote(w io.Writer, ans *api.OverrideAnswer) {
	if ans.Note != "" {
		fmt.Fprintf(w, "  note: %s\n", ans.Note)
	}
}
