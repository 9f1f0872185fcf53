package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/admin/client"
	"github.com/vipd/vipd/control/config"
)

// keepalivedFlags are the flags of both keepalived commands.
func keepalivedFlags(name string, stderr io.Writer) (fs *flag.FlagSet, socket, cfgPath, stateFile *string) {
	fs = flag.NewFlagSet("vipd "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket = fs.String("socket", "", "admin socket `path` (default: [admin] socket of -config, else "+config.DefaultAdminSocket+")")
	cfgPath = fs.String("config", "", "configuration `file` whose [admin] socket to use")
	stateFile = fs.String("state-file", config.DefaultKeepalivedState, "`file` holding the VRRP state keepalived last notified")
	return
}

// roleOf maps keepalived's VRRP states to vipd's roles: only MASTER
// answers for the VIPs.
func roleOf(vrrp string) (string, bool) {
	switch vrrp {
	case "MASTER":
		return api.RoleActive, true
	case "BACKUP", "FAULT", "STOP":
		return api.RoleStandby, true
	}
	return "", false
}

// keepalivedNotify is keepalived's notify script: keepalived runs it with
// TYPE NAME STATE [PRIORITY] appended ("INSTANCE VI_1 MASTER 100"). MASTER
// makes the box active, BACKUP, FAULT and STOP standby. The state is
// recorded first, so that keepalived-check puts vipd right when this
// switch cannot reach it (vipd restarting).
func keepalivedNotify(args []string, stdout, stderr io.Writer) int {
	fs, socket, cfgPath, stateFile := keepalivedFlags("keepalived-notify", stderr)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	usage := "usage: vipd keepalived-notify [-socket PATH | -config FILE] [-state-file FILE] TYPE NAME STATE [PRIORITY]\n(keepalived appends TYPE NAME STATE PRIORITY to its notify command)"
	if fs.NArg() < 3 || fs.NArg() > 4 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	vrrp := fs.Arg(2)
	role, ok := roleOf(vrrp)
	if !ok {
		fmt.Fprintf(stderr, "vipd keepalived-notify: state %q: want MASTER, BACKUP, FAULT or STOP\n%s\n", vrrp, usage)
		return 2
	}
	if err := writeState(*stateFile, vrrp); err != nil {
		// A state keepalived has left is worse than none: a check that
		// finds none fails while vipd is standby, one that finds the
		// old state acts on it.
		if rmErr := os.Remove(*stateFile); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
			err = fmt.Errorf("%w; and removing the previous state: %w", err, rmErr)
		}
		fmt.Fprintf(stderr, "vipd keepalived-notify: recording %s: %v\n", vrrp, err)
	}
	path, err := drainSocket(*socket, "", *cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "vipd keepalived-notify: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ans, err := client.SetRole(ctx, path, role)
	if err != nil {
		fmt.Fprintf(stderr, "vipd keepalived-notify: %s %s %s: %v (keepalived-check switches vipd once it answers)\n", fs.Arg(0), fs.Arg(1), vrrp, err)
		return 1
	}
	fmt.Fprintf(stdout, "keepalived %s %s: %s; vipd ", fs.Arg(1), vrrp, role)
	writeRole(stdout, ans)
	return 0
}

// keepalivedCheck is keepalived's track script: it exits 0 while vipd
// runs its workers and every VIP has at least min_healthy backends up, and
// 1 otherwise, saying why; keepalived then lowers the box's priority (the
// script's weight) or puts it in FAULT. It also puts vipd's role right
// when it differs from the VRRP state keepalived last notified (a vipd
// that restarted in its configured role while this box is MASTER, or a
// notify that found vipd down), and fails when that switch fails.
//
// With no state recorded (none notified since boot, the file removed, or
// unreadable) it cannot tell a MASTER from a BACKUP. While vipd is
// standby it fails: on a MASTER nobody would answer for the VIPs, and
// the failure is what makes keepalived notify (FAULT, and the state after
// it), which ends the doubt. While vipd is active it passes: at worst
// both boxes answer ARP/NDP, and both forward every flow to the same
// backend; failing would fail over a MASTER that is most likely right.
func keepalivedCheck(args []string, stdout, stderr io.Writer) int {
	fs, socket, cfgPath, stateFile := keepalivedFlags("keepalived-check", stderr)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: vipd keepalived-check [-socket PATH | -config FILE] [-state-file FILE]")
		return 2
	}
	path, err := drainSocket(*socket, "", *cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "vipd keepalived-check: %v\n", err)
		return 1
	}
	// keepalived's script timeout is a few seconds: answer within 2.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := client.FetchSocketState(ctx, path)
	if err != nil {
		fmt.Fprintf(stderr, "vipd keepalived-check: vipd is down or not ready: %v\n", err)
		return 1
	}
	var failed []string
	vrrp, err := readState(*stateFile)
	switch {
	case err != nil && st.Role == api.RoleStandby:
		failed = append(failed, fmt.Sprintf("vipd is standby and keepalived's state is unknown (%v): failing until keepalived notifies one (is `vipd keepalived-notify` the instance's notify command?)", err))
	case err != nil:
		if !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(stderr, "vipd keepalived-check: vipd is %s, keepalived's state unknown: %v\n", st.Role, err)
		}
	default:
		if want, _ := roleOf(vrrp); st.Role != "" && want != st.Role {
			if ans, err := client.SetRole(ctx, path, want); err != nil {
				failed = append(failed, fmt.Sprintf("keepalived says %s, vipd is %s, and switching it failed: %v", vrrp, st.Role, err))
			} else {
				fmt.Fprintf(stdout, "keepalived says %s: vipd was %s, now ", vrrp, st.Role)
				writeRole(stdout, ans)
			}
		}
	}
	var below []string
	for _, v := range st.VIPs {
		if v.BackendsUp < v.MinHealthy {
			below = append(below, fmt.Sprintf("%s: %d backends up, min_healthy %d", v.Name, v.BackendsUp, v.MinHealthy))
		}
	}
	if len(below) > 0 {
		failed = append(failed, "below min_healthy: "+strings.Join(below, "; "))
	}
	for _, f := range failed {
		fmt.Fprintf(stderr, "vipd keepalived-check: %s\n", f)
	}
	if len(failed) > 0 {
		return 1
	}
	return 0
}

// readState reads the VRRP state keepalived-notify recorded in file.
func readState(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	vrrp := strings.TrimSpace(string(b))
	if _, ok := roleOf(vrrp); !ok {
		return "", fmt.Errorf("%s holds %q, no VRRP state", file, vrrp)
	}
	return vrrp, nil
}

// writeState replaces file with state, atomically (keepalived-check may
// read it at any time).
func writeState(file, state string) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(state+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}
