package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/admin/client"
	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/control/daemon"
	"github.com/vipd/vipd/control/fleet"
	"github.com/vipd/vipd/internal/procs"
	"github.com/vipd/vipd/internal/ratelog"
	"github.com/vipd/vipd/internal/sdnotify"
)

// version is set at build time: -ldflags "-X main.version=..."
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage:
  vipd -config FILE                   run the load balancer
  vipd -check -config FILE            validate FILE and print a summary
  vipd -check-host -config FILE       the same, and check this machine has what FILE names
  vipd status [-json] [-rate] [-stats] [-admin ADDR | -config FILE]
                                      print VIPs, backends and flows (like ipvsadm -Ln);
                                      -rate: flows, packets and bytes per second (ipvsadm -Ln --rate)
  vipd top [-n N] [-interval D] [-admin ADDR | -config FILE]
                                      live rates per VIP, backend and worker, redrawn every second
  vipd events [-f] [-n N] [-json] [-admin ADDR | -config FILE]
                                      the event log: health changes, drains, overrides, reloads, role,
                                      BGP sessions, ejections, admin changes with their caller; -f follows
  vipd drain [-undo] [-reason TEXT] [-socket PATH | -config FILE] VIP BACKEND
                                      stop new flows to BACKEND (addr:port) of VIP, keeping its flows
                                      (as root: through the admin socket, default ` + config.DefaultAdminSocket + `)
  vipd where [-json] [-port P] [-admin ADDR | -config FILE] VIP CLIENT:PORT
                                      which backend a new flow from CLIENT gets
  vipd weight [-reason TEXT] [-socket PATH | -config FILE] VIP BACKEND N|-reset
                                      run-time override: BACKEND takes weight N (0..1000; 0: no new
                                      flows) over the file's until -reset, across reloads and restarts
  vipd disable|enable [-reason TEXT] [-socket PATH | -config FILE] VIP BACKEND
                                      run-time override: BACKEND takes no flows at all / again
                                      (VIP: name or ADDR[:PORT]; BACKEND: ADDR[:PORT], ADDR if unambiguous)
  vipd peers [-json] [-admin ADDR | -config FILE]
                                      the BGP sessions and their state
  vipd conns [-client ADDR] [-backend ADDR] [-limit N] [-json] [-admin ADDR | -config FILE] [VIP]
                                      the pinned flows (like ipvsadm -Lnc), at most N (default 1000)
  vipd active|standby [-socket PATH | -config FILE]
                                      neighbor role: answer ARP/NDP for the VIPs and announce them, or
                                      forward what arrives but neither
  vipd keepalived-notify [-socket PATH | -config FILE] [-state-file FILE] TYPE NAME STATE [PRIORITY]
                                      keepalived's notify script: MASTER makes the box active, BACKUP,
                                      FAULT and STOP standby; records the state (default ` + config.DefaultKeepalivedState + `)
  vipd keepalived-check [-socket PATH | -config FILE] [-state-file FILE]
                                      keepalived's track script: exit 1 while vipd is down, not ready or
                                      below min_healthy on a VIP, or standby with no state recorded;
                                      puts the role right for keepalived
  vipd drain-box [-undo] [-no-wait] [-socket PATH | -config FILE]
                                      lame duck (with [bgp]): withdraw every VIP from the routers, keep
                                      forwarding for [bgp] linger, then report drained; -undo announces again
  vipd reload [-socket PATH | -config FILE]
                                      reload the configuration file and print what changed, or every
                                      error (exit 1: refused, the running configuration stays)
  vipd fleet push [-n] FILE | pull | status [-json] [-config FILE] [-timeout D]
                                      the fleet's shared configuration in etcd ([fleet] of FILE): check
                                      and write it (-n: print what changes), print it, every box's status
  vipd -version

Signals: SIGHUP reloads the configuration (a bad file keeps the old one),
SIGTERM and SIGINT stop vipd and remove its XDP program. With [bgp] and
drain_on_stop (the default), SIGTERM first drains the box like drain-box
and stops after the linger time; a second SIGTERM (or SIGINT) stops at once.

flags:
`

// run is main without the process: it returns the exit status, so that tests
// can drive every flag.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "status":
			return status(args[1:], stdout, stderr)
		case "drain":
			return drain(args[1:], stdout, stderr)
		case "where":
			return where(args[1:], stdout, stderr)
		case "conns":
			return conns(args[1:], stdout, stderr)
		case "drain-box":
			return drainBox(args[1:], stdout, stderr)
		case "weight":
			return weightCmd(args[1:], stdout, stderr)
		case "disable", "enable":
			return disableCmd(args[1:], stdout, stderr, args[0] == "disable")
		case "reload":
			return reload(args[1:], stdout, stderr)
		case "active", "standby":
			return roleCmd(args[0], args[1:], stdout, stderr)
		case "keepalived-notify":
			return keepalivedNotify(args[1:], stdout, stderr)
		case "keepalived-check":
			return keepalivedCheck(args[1:], stdout, stderr)
		case "peers":
			return peers(args[1:], stdout, stderr)
		case "top":
			return top(args[1:], stdout, stderr)
		case "events":
			return eventsCmd(args[1:], stdout, stderr)
		case "fleet":
			return fleetCmd(args[1:], stdout, stderr)
		}
	}
	fs := flag.NewFlagSet("vipd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "configuration `file` (see config.toml.example)")
	check := fs.Bool("check", false, "validate the configuration, print a summary and exit (0 valid, 1 invalid)")
	checkOnHost := fs.Bool("check-host", false, "-check, and check that this machine has what the file names (interfaces up, XDP mode, MTUs, admin socket directory): for the box itself, as the unit's ExecStartPre")
	showVersion := fs.Bool("version", false, "print the version and exit")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "log format: text or json (journald keeps either)")
	logJSON := fs.Bool("log-json", false, "the same as -log-format json")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "vipd: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	if *showVersion {
		fmt.Fprintf(stdout, "vipd %s\n", version)
		return 0
	}
	if *cfgPath == "" {
		fmt.Fprintln(stderr, "vipd: -config FILE is required")
		fs.Usage()
		return 2
	}
	cfg, warns, err := config.Load(*cfgPath)
	for _, w := range warns {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	if err != nil {
		fmt.Fprintf(stderr, "vipd: %v\n", err)
		return 1
	}
	if *check || *checkOnHost {
		ok := checkHost(cfg, stdout, stderr)
		if *checkOnHost {
			ok = checkMachine(cfg, stderr) && ok
		}
		if !ok {
			return 1
		}
		fmt.Fprintf(stdout, "%s: OK\n", *cfgPath)
		if err := config.WriteSummary(stdout, cfg); err != nil {
			return 1
		}
		return 0
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "vipd: -log-level: %v\n", err)
		return 2
	}
	hopts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch {
	case *logJSON || *logFormat == "json":
		h = slog.NewJSONHandler(stderr, hopts)
	case *logFormat == "text":
		h = slog.NewTextHandler(stderr, hopts)
	default:
		fmt.Fprintf(stderr, "vipd: -log-format: %q is neither text nor json\n", *logFormat)
		return 2
	}
	// A warning that repeats (a host change the snapshot cannot take, a
	// peer that keeps refusing) is logged once a minute, with a count.
	log := slog.New(ratelog.New(h, time.Minute))
	return serve(cfg, *cfgPath, log)
}

// logProcs says what procs.Spare did for workers workers: the raise, or
// a GOMAXPROCS from the environment that leaves no P besides them.
func logProcs(pr procs.Result, workers int, log *slog.Logger) {
	switch {
	case pr.Raised():
		log.Info("GOMAXPROCS raised to leave one P besides the workers", "from", pr.Before, "to", pr.After, "workers", workers)
	case pr.FromEnv && pr.Short(workers):
		log.Warn("GOMAXPROCS from the environment leaves no P besides the workers: their system calls will hand theirs over to the rest of vipd", "GOMAXPROCS", pr.After, "workers", workers)
	}
}

// serve runs the daemon until SIGTERM or SIGINT, reloading on SIGHUP.
func serve(cfg *config.Config, path string, log *slog.Logger) int {
	if os.Geteuid() != 0 {
		log.Warn("vipd usually needs root (or CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF) for AF_XDP, AF_PACKET and XDP")
	}
	// One P per worker, which holds it, and one for everything else.
	logProcs(procs.Spare(cfg.Dataplane.Queues), cfg.Dataplane.Queues, log)
	var fsrc *daemon.FleetSource
	if cfg.Fleet != nil {
		src, closeFleet, err := beginFleet(cfg, log)
		if err != nil {
			log.Error("vipd cannot start", "err", err)
			return 1
		}
		defer closeFleet()
		fsrc, cfg = src, src.Composed.Config
	}
	d := daemon.New(cfg, daemon.Options{
		ConfigPath: path, Platform: daemon.NewLinuxPlatform(cfg, log), Log: log, Version: version, Fleet: fsrc,
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Type=notify under systemd: READY=1 once the workers forward, the
	// watchdog fed while they all make progress, RELOADING=1 around
	// reloads, STOPPING=1 when the stop begins.
	sd, err := sdnotify.FromEnv()
	if err != nil {
		log.Warn("no systemd notifications", "err", err)
	}
	defer sd.Close()
	watchdog, err := sdnotify.WatchdogPeriod()
	if err != nil {
		log.Warn("no systemd watchdog", "err", err)
	}
	if sd != nil {
		go d.Notify(ctx, sd, watchdog)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	// Reloads run apart from this loop: one that arrives while vipd starts
	// waits for the start, and SIGTERM must still be heard meanwhile. A
	// SIGHUP while a reload is pending adds nothing: that reload reads the
	// file when it runs.
	hup := make(chan struct{}, 1)
	defer close(hup)
	go func() {
		for range hup {
			sd.Send(sdnotify.Reloading())
			d.Reload() // logs its own outcome; a refused file keeps the old one
			if d.Ready() == nil {
				sd.Send("READY=1")
			}
		}
	}()
	stop := func() int {
		sd.Send("STOPPING=1")
		cancel()
		select {
		case err := <-done:
			return exitCode(err, log)
		case <-time.After(10 * time.Second):
			log.Error("workers did not stop within 10 s")
			return 1
		}
	}
	var lameDuck <-chan struct{} // closed when the SIGTERM lame duck is over
	for {
		select {
		case s := <-sigs:
			if s == syscall.SIGHUP {
				log.Info("SIGHUP: reloading", "file", path)
				select {
				case hup <- struct{}{}:
				default:
				}
				continue
			}
			if s == syscall.SIGTERM && lameDuck == nil {
				if lameDuck = d.LameDuck(); lameDuck != nil {
					sd.Send("STOPPING=1\nSTATUS=draining: every VIP withdrawn")
					log.Info("SIGTERM: draining the box first (every VIP withdrawn, forwarding for [bgp] linger); another SIGTERM stops at once")
					continue
				}
			}
			log.Info("stopping", "signal", s.String())
			return stop()
		case <-lameDuck:
			log.Info("stopping: the box is drained")
			return stop()
		case err := <-done:
			return exitCode(err, log)
		}
	}
}

func drainBox(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vipd drain-box", flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", "", "admin socket `path` (default: [admin] socket of -config, else "+config.DefaultAdminSocket+")")
	cfgPath := fs.String("config", "", "configuration `file` whose [admin] socket to use")
	undo := fs.Bool("undo", false, "end the lame duck: announce the VIPs again")
	noWait := fs.Bool("no-wait", false, "return once everything is withdrawn, without waiting for the linger time")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: vipd drain-box [-undo] [-no-wait] [-socket PATH | -config FILE]")
		return 2
	}
	path, err := socketFor(*socket, "", *cfgPath, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "vipd drain-box: %v\n", err)
		return 1
	}
	ctx := context.Background()
	ans, err := client.DrainBox(ctx, path, *undo)
	if err != nil {
		fmt.Fprintf(stderr, "vipd drain-box: %v\n", err)
		return 1
	}
	switch {
	case *undo:
		fmt.Fprintln(stdout, "announcing again")
		return 0
	case ans.Box == api.BoxDraining:
		fmt.Fprintf(stdout, "every VIP withdrawn; forwarding until %s so that the routers converge\n", ans.LingerUntil.Format(time.RFC3339))
		if *noWait {
			return 0
		}
	}
	for ans.Box != api.BoxDrained {
		// At least 10 ms between polls: past the linger's end the wait
		// would be negative.
		time.Sleep(max(min(time.Until(ans.LingerUntil), time.Second), 0) + 10*time.Millisecond)
		st, err := client.FetchSocketState(ctx, path)
		if err != nil {
			fmt.Fprintf(stderr, "vipd drain-box: %v\n", err)
			return 1
		}
		if st.BGP == nil {
			fmt.Fprintln(stderr, "vipd drain-box: vipd reports no BGP state")
			return 1
		}
		if st.BGP.Box == api.BoxAnnouncing {
			// Undone meanwhile (drain-box -undo, or vipd restarted): it
			// will not drain.
			fmt.Fprintln(stderr, "vipd drain-box: the box is announcing again (the drain was undone)")
			return 1
		}
		ans.Box, ans.LingerUntil = st.BGP.Box, st.BGP.LingerUntil
	}
	fmt.Fprintln(stdout, "drained: no router sends this box new flows; it can be stopped")
	return 0
}

func exitCode(err error, log *slog.Logger) int {
	if err != nil {
		log.Error("vipd failed", "err", err)
		return 1
	}
	return 0
}

// adminFlags are the flags of the admin client commands.
func adminFlags(name string, stderr io.Writer) (*flag.FlagSet, *string, *string) {
	fs := flag.NewFlagSet("vipd "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("admin", "", "admin server `host:port` (default: [admin] listen of -config, else "+config.DefaultAdminListen+")")
	cfg := fs.String("config", "", "configuration `file` whose [admin] listen to use")
	return fs, addr, cfg
}

func drain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vipd drain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", "", "admin socket `path` (default: [admin] socket of -config, else "+config.DefaultAdminSocket+")")
	cfgPath := fs.String("config", "", "configuration `file` whose [admin] socket to use")
	addr := fs.String("admin", "", "the admin socket's `path`, like -socket (drains are not served over TCP)")
	undo := fs.Bool("undo", false, "undrain: let the backend take new flows again")
	ff := addFleetFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 2 || !ff.check("drain", stderr) {
		fmt.Fprintln(stderr, "usage: vipd drain [-undo] [-reason TEXT] [-socket PATH | -config FILE] VIP BACKEND\n       vipd drain -fleet [-undo] [-wait] [-reason TEXT] [-config FILE] VIP BACKEND")
		return 2
	}
	if *ff.on {
		change := fleetChange{set: &fleet.Override{Drain: true}}
		if *undo {
			change = fleetChange{undo: "drain"}
		}
		return fleetOverride("drain", ff, *cfgPath, fs.Arg(0), fs.Arg(1), change, stdout, stderr)
	}
	path, err := socketFor(*socket, *addr, *cfgPath, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "vipd drain: %v\n", err)
		return 1
	}
	if err := client.Drain(context.Background(), path, fs.Arg(0), fs.Arg(1), !*undo, *ff.reason); err != nil {
		fmt.Fprintf(stderr, "vipd drain: %v\n", err)
		return 1
	}
	verb := "draining"
	if *undo {
		verb = "undrained"
	}
	fmt.Fprintf(stdout, "%s %s of %s\n", verb, fs.Arg(1), fs.Arg(0))
	return 0
}

func where(args []string, stdout, stderr io.Writer) int {
	fs, addrFlag, cfgFlag := adminFlags("where", stderr)
	port := fs.Uint("port", 0, "the VIP port, for VIPs that serve every port")
	asJSON := fs.Bool("json", false, "print /v1/where's answer as JSON")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 2 || *port > 65535 {
		fmt.Fprintln(stderr, "usage: vipd where [-port P] [-admin ADDR | -config FILE] VIP CLIENT:PORT")
		return 2
	}
	addr, err := adminAddr(*addrFlag, *cfgFlag, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "vipd where: %v\n", err)
		return 1
	}
	ans, err := client.Where(context.Background(), addr, fs.Arg(0), fs.Arg(1), uint16(*port))
	if err != nil {
		fmt.Fprintf(stderr, "vipd where: %v\n", err)
		return 1
	}
	if *asJSON {
		if writeJSON(stdout, ans) != 0 || ans.Backend == "" {
			return 1
		}
		return 0
	}
	if ans.Backend == "" {
		fmt.Fprintf(stdout, "%s from %s: %s\n", ans.VIP, ans.Client, ans.Note)
		return 1
	}
	fmt.Fprintf(stdout, "%s from %s -> %s (%s)\n", ans.VIP, ans.Client, ans.Backend, ans.Note)
	if ans.Previous != "" {
		fmt.Fprintf(stdout, "  previous owner %s: a mid-stream packet that misses the connection table carries it as a hint\n", ans.Previous)
	}
	return 0
}
