package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/user"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/control/daemon"
	"github.com/vipd/vipd/control/fleet"
)

// The fleet's forms of vipd drain, weight, disable and enable (-fleet):
// they write the key overrides/VIP/BACKEND under the fleet's prefix,
// which every box applies, instead of asking this box's admin socket.
// A backend has one fleet override at a time: the last written is in
// force; undoing one (drain -undo, weight -reset, enable) deletes the
// key when it holds that kind of override.

// fleetFlags are the flags the override commands add for -fleet.
type fleetFlags struct {
	on      *bool
	wait    *bool
	reason  *string
	timeout *time.Duration
}

func addFleetFlags(fs *flag.FlagSet) fleetFlags {
	return fleetFlags{
		on:      fs.Bool("fleet", false, "change every box of the fleet: write the override to etcd ([fleet] of -config, default /etc/vipd/vipd.toml)"),
		wait:    fs.Bool("wait", false, "with -fleet: return when every live box runs the change, naming those that do not within -timeout"),
		reason:  fs.String("reason", "", "why: kept with the change, in the event log (vipd events) and, with -fleet, the override shown in vipd status"),
		timeout: fs.Duration("timeout", 10*time.Second, "with -fleet: how long to wait for etcd and, with -wait, for the boxes"),
	}
}

// check says what is wrong with the flags given alone.
func (f fleetFlags) check(name string, stderr io.Writer) bool {
	if !*f.on && *f.wait {
		fmt.Fprintf(stderr, "vipd %s: -wait goes with -fleet\n", name)
		return false
	}
	return true
}

// fleetChange is one change to a backend's fleet override: set (a
// drain, a weight, disabled) or undo the kind named.
type fleetChange struct {
	set  *fleet.Override
	undo string // "drain", "weight" or "disabled"
}

// fleetOverride makes change to backend of vip in the fleet the local
// file at cfgPath names, and with -wait waits for every live box.
func fleetOverride(name string, ff fleetFlags, cfgPath, vip, backend string, change fleetChange, stdout, stderr io.Writer) int {
	if cfgPath == "" {
		cfgPath = "/etc/vipd/vipd.toml"
	}
	var local *config.Config
	fail := func(err error) int {
		if local != nil && local.Fleet != nil {
			err = etcdError(err, local.Fleet, *ff.timeout)
		}
		fmt.Fprintf(stderr, "vipd %s -fleet: %v\n", name, err)
		return 1
	}
	local, _, err := config.Load(cfgPath)
	if err != nil {
		local = nil
		return fail(err)
	}
	if local.Fleet == nil {
		return fail(fmt.Errorf("%s has no [fleet]", cfgPath))
	}
	cli, err := fleet.NewClient(local.Fleet)
	if err != nil {
		return fail(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *ff.timeout)
	defer cancel()
	prefix := local.Fleet.Prefix
	// The backend is named as the fleet's document names it, as vipd
	// status would resolve it on any box.
	doc, mod, err := fleet.Pull(ctx, cli, prefix)
	if err != nil {
		return fail(err)
	}
	if doc == nil {
		return fail(fmt.Errorf("the fleet under %s has no configuration yet (vipd fleet push FILE)", prefix))
	}
	cfg, _, err := config.WithShared(local, fmt.Sprintf("the fleet's revision %d", mod), doc)
	if err != nil {
		return fail(err)
	}
	v, err := daemon.ResolveVIP(cfg, vip)
	if err != nil {
		return fail(err)
	}
	b, err := daemon.ResolveBackend(v, backend)
	if err != nil {
		return fail(err)
	}
	ap := netip.AddrPortFrom(b.Address, b.Port)
	label := v.Name + " " + api.BackendName{Addr: b.Address, Port: b.Port}.String()
	var rev int64
	if change.set != nil {
		o := *change.set
		o.By, o.Why, o.At = who(), *ff.reason, time.Now().UTC()
		if rev, err = fleet.SetOverride(ctx, cli, prefix, v.Name, ap, &o); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "%s: %s written to the fleet (revision %d); every box applies it\n", label, o.What(), rev)
	} else {
		key := prefix + fleet.KeyOverrides + v.Name + "/" + ap.String()
		resp, err := cli.Get(ctx, key)
		if err != nil {
			return fail(err)
		}
		if len(resp.Kvs) == 0 {
			fmt.Fprintf(stdout, "%s: the fleet has no override of it: nothing to undo\n", label)
			return 0
		}
		o, err := fleet.ParseOverride(v.Name+"/"+ap.String(), resp.Kvs[0].Value)
		if err == nil && !strings.HasPrefix(o.What(), change.undo) {
			return fail(fmt.Errorf("%s: the fleet's override is %s, not %s: undo that one (or write another)", label, o.What(), change.undo))
		}
		// Deleted only if unchanged since read: an override written
		// meanwhile is someone else's to undo.
		txn, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", resp.Kvs[0].ModRevision)).Then(clientv3.OpDelete(key)).Commit()
		if err != nil {
			return fail(err)
		}
		if !txn.Succeeded {
			return fail(fmt.Errorf("%s: the fleet's override changed while this command ran: look again (vipd status)", label))
		}
		rev = txn.Header.Revision
		fmt.Fprintf(stdout, "%s: the fleet's %s undone (revision %d)\n", label, change.undo, rev)
	}
	if !*ff.wait {
		return 0
	}
	// The wait has its own -timeout from the write: the write may have
	// used most of the first one on a slow etcd.
	wctx, wcancel := context.WithTimeout(context.Background(), *ff.timeout)
	defer wcancel()
	behind, err := fleet.WaitApplied(wctx, cli, prefix, rev)
	switch {
	case err != nil:
		return fail(fmt.Errorf("waiting for the boxes: %w", err))
	case len(behind) > 0:
		fmt.Fprintf(stderr, "vipd %s -fleet: after %v, not applied by: %s (vipd fleet status says why)\n", name, *ff.timeout, strings.Join(behind, ", "))
		return 1
	}
	boxes, _ := fleet.Boxes(wctx, cli, prefix)
	fmt.Fprintf(stdout, "applied by every live box (%d)\n", len(boxes))
	return 0
}

// who names the operator for the override's "by": user@host.
func who() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}
