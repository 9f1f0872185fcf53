package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/control/daemon"
	"github.com/vipd/vipd/control/fleet"
)

// fleetCmd is vipd fleet: pull, push and status, against the etcd the
// local file's [fleet] names.
func fleetCmd(args []string, stdout, stderr io.Writer) int {
	const usageText = "usage: vipd fleet pull|status [-json]|push [-n] FILE [-config FILE]"
	if len(args) == 0 {
		fmt.Fprintln(stderr, usageText)
		return 2
	}
	sub := args[0]
	if strings.HasPrefix(sub, "-") {
		// vipd fleet -h: the flags every subcommand takes.
		sub, args = "", append([]string{""}, args...)
	}
	fs := flag.NewFlagSet("fleet "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "/etc/vipd/vipd.toml", "the box's configuration `file`, whose [fleet] says where the fleet is")
	asJSON := fs.Bool("json", false, "status: print the boxes' status keys as JSON")
	dryRun := fs.Bool("n", false, "push: check and print what would change, write nothing")
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for etcd")
	fs.Usage = func() {
		fmt.Fprintln(stderr, usageText)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if sub == "" {
		fmt.Fprintln(stderr, usageText)
		return 2
	}
	cfg, _, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "vipd fleet %s: %v\n", sub, err)
		return 1
	}
	if cfg.Fleet == nil {
		fmt.Fprintf(stderr, "vipd fleet %s: %s has no [fleet]\n", sub, *cfgPath)
		return 1
	}
	cli, err := fleet.NewClient(cfg.Fleet)
	if err != nil {
		fmt.Fprintf(stderr, "vipd fleet %s: %v\n", sub, err)
		return 1
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	prefix := cfg.Fleet.Prefix
	explain := func(err error) error { return etcdError(err, cfg.Fleet, *timeout) }
	switch {
	case sub == "pull" && fs.NArg() == 0:
		doc, _, err := fleet.Pull(ctx, cli, prefix)
		if err != nil {
			fmt.Fprintf(stderr, "vipd fleet pull: %v\n", explain(err))
			return 1
		}
		if doc == nil {
			fmt.Fprintf(stderr, "vipd fleet pull: the fleet under %s has no configuration yet (vipd fleet push FILE)\n", prefix)
			return 1
		}
		stdout.Write(doc)
		return 0
	case sub == "status" && fs.NArg() == 0:
		return fleetStatus(ctx, cli, prefix, *asJSON, explain, stdout, stderr)
	case sub == "push" && fs.NArg() == 1:
		return fleetPush(ctx, cli, cfg, fs.Arg(0), *dryRun, explain, stdout, stderr)
	}
	fmt.Fprintln(stderr, usageText)
	return 2
}

// fleetStatus prints every live box's status and what disagrees.
func fleetStatus(ctx context.Context, cli *clientv3.Client, prefix string, asJSON bool, explain func(error) error, stdout, stderr io.Writer) int {
	boxes, err := fleet.Boxes(ctx, cli, prefix)
	if err != nil {
		fmt.Fprintf(stderr, "vipd fleet status: %v\n", explain(err))
		return 1
	}
	_, mod, err := fleet.Pull(ctx, cli, prefix)
	if err != nil {
		fmt.Fprintf(stderr, "vipd fleet status: %v\n", explain(err))
		return 1
	}
	// The latest change: the config key's, or a later one some box
	// applied (an override, which a deletion leaves no key to show).
	latest := mod
	for _, b := range boxes {
		latest = max(latest, b.Revision)
	}
	a := fleet.Agree(latest, boxes)
	if asJSON {
		writeJSON(stdout, boxes)
		if !a.OK() {
			return 1
		}
		return 0
	}
	return writeFleetStatus(stdout, boxes, a, time.Now())
}

// fleetPush checks FILE as the fleet's shared configuration (with this
// box's own settings), and writes it over the revision it read.
func fleetPush(ctx context.Context, cli *clientv3.Client, cfg *config.Config, file string, dryRun bool, explain func(error) error, stdout, stderr io.Writer) int {
	doc, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintf(stderr, "vipd fleet push: %v\n", err)
		return 1
	}
	next, _, err := config.WithShared(cfg, file, doc)
	if err != nil {
		fmt.Fprintf(stderr, "vipd fleet push: %v\n", err)
		return 1
	}
	old, mod, err := fleet.Pull(ctx, cli, cfg.Fleet.Prefix)
	if err != nil {
		fmt.Fprintf(stderr, "vipd fleet push: %v\n", explain(err))
		return 1
	}
	if string(old) == string(doc) {
		fmt.Fprintf(stdout, "unchanged: the fleet's configuration is already %s (revision %d)\n", file, mod)
		return 0
	}
	// What changes, as vipd reload prints it: against the fleet's
	// current document when it is one this box can read (else every VIP
	// is new).
	var res api.ReloadResult
	empty := *next // the box as it is, without the fleet's VIPs
	empty.VIPs = nil
	prev := &empty
	if old != nil {
		if p, _, err := config.WithShared(cfg, fmt.Sprintf("the fleet's revision %d", mod), old); err == nil {
			prev = p
		}
	}
	daemon.AddDiff(&res, config.Compare(prev, next))
	if dryRun {
		fmt.Fprintf(stdout, "would replace the fleet's configuration (revision %d) with %s:\n", mod, file)
		writeChanges(stdout, &res)
		return 0
	}
	rev, err := fleet.Push(ctx, cli, cfg.Fleet.Prefix, doc, mod)
	if errors.Is(err, fleet.ErrChanged) {
		fmt.Fprintf(stderr, "vipd fleet push: %v: pull it, redo your change and push again\n", err)
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "vipd fleet push: %v\n", explain(err))
		return 1
	}
	fmt.Fprintf(stdout, "pushed %s as revision %d:\n", file, rev)
	writeChanges(stdout, &res)
	return 0
}

// beginFleet connects a box with [fleet] to its fleet and reads what it
// starts with (fleet.Begin: etcd, else the cache); the function returned
// closes the connection when vipd stops.
func beginFleet(local *config.Config, log *slog.Logger) (*daemon.FleetSource, func(), error) {
	f := local.Fleet
	cli, err := fleet.NewClient(f)
	if err != nil {
		return nil, nil, err
	}
	store := &fleet.EtcdStore{Client: cli, Prefix: f.Prefix}
	b, err := fleet.Begin(context.Background(), store, local, f.DialTimeout.D())
	if err != nil {
		cli.Close()
		return nil, nil, err
	}
	switch {
	case b.FromCache:
		log.Warn("starting from the fleet cache: vipd serves its last applied revision and follows the fleet once etcd answers",
			"why", b.Etcd.Error(), "revision", b.Keys.Revision, "saved", b.Saved, "cache_file", f.CacheFile)
	case b.CacheProblem != nil:
		log.Warn("the fleet cache is not usable; the revision read from etcd replaces it", "err", b.CacheProblem.Error())
	}
	for _, w := range b.Composed.Warnings {
		log.Warn("fleet config warning", "revision", b.Keys.Revision, "problem", w.String())
	}
	for _, s := range b.Composed.Ignored {
		log.Warn("fleet key ignored", "revision", b.Keys.Revision, "problem", s)
	}
	log.Info("fleet", "endpoints", f.Endpoints, "prefix", f.Prefix, "box", f.Box, "revision", b.Keys.Revision,
		"vips", len(b.Composed.Config.VIPs), "overrides", len(b.Composed.Overrides), "from_cache", b.FromCache)
	bk := &fleet.BoxKey{Client: cli, Prefix: f.Prefix, Box: f.Box}
	src := &daemon.FleetSource{Store: store, Local: local, Start: b.Keys, Composed: b.Composed,
		FromCache: b.FromCache, Saved: b.Saved, BoxKey: bk.Run}
	return src, func() { cli.Close() }, nil
}

// etcdError says which etcd did not answer, and within what, when err is
// a request's timeout; other errors are etcd's own and pass as they are.
func etcdError(err error, f *config.Fleet, timeout time.Duration) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("etcd (%s) did not answer within %v (-timeout; etcd without a quorum answers no request): %w", strings.Join(f.Endpoints, ", "), timeout, err)
	}
	return err
}
