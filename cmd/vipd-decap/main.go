package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/vipd/vipd/decap"
)

// version is set at build time: -ldflags "-X main.version=..."
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: vipd-decap [flags]

Receives vipd's DSR packets (IPv4 in IPv4; with -ipv6 also IPv6 in IPv6),
strips the outer header and delivers the client's packet to this host's
stack through a TUN device. For hosts without the ipip module; see
"go doc github.com/vipd/vipd/cmd/vipd-decap". Needs root, or CAP_NET_ADMIN
and CAP_NET_RAW. SIGTERM or SIGINT stops it and removes the TUN device.

flags:
`

// run is main without the process: it returns the exit status (0 stopped
// by a signal, 1 failed, 2 bad usage), so that tests can drive the flags.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vipd-decap", flag.ContinueOnError)
	fs.SetOutput(stderr)
	tun := fs.String("tun", decap.DefaultTUN, "`name` of the TUN device to create (at most 15 bytes)")
	ipv6 := fs.Bool("ipv6", false, "also decapsulate IPv6 in IPv6 (next header 41)")
	allow := fs.String("allow", "", "comma-separated `prefixes` (or addresses) of the outer sources to accept,\nnormally vipd's encapsulation addresses; empty accepts any source")
	checkLocal := fs.Bool("check-local", false, "drop inner packets whose destination is not an address of this host")
	fixSysctls := fs.Bool("fix-sysctls", false, "set net.ipv4.conf.all.rp_filter=0 if needed (keeping other interfaces'\neffective value), restored on exit; without it vipd-decap refuses to start")
	statsEvery := fs.Duration("stats-interval", time.Minute, "log the counters this often; 0 logs them only on exit")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	logJSON := fs.Bool("log-json", false, "log in JSON instead of text")
	showVersion := fs.Bool("version", false, "print the version and exit")
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
		fmt.Fprintf(stderr, "vipd-decap: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	if *showVersion {
		fmt.Fprintf(stdout, "vipd-decap %s\n", version)
		return 0
	}
	allowed, err := parsePrefixes(*allow)
	if err != nil {
		fmt.Fprintf(stderr, "vipd-decap: -allow: %v\n", err)
		return 2
	}
	if *statsEvery < 0 {
		fmt.Fprintln(stderr, "vipd-decap: -stats-interval must not be negative")
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "vipd-decap: -log-level: %v\n", err)
		return 2
	}
	hopts := &slog.HandlerOptions{Level: level}
	var log *slog.Logger
	if *logJSON {
		log = slog.New(slog.NewJSONHandler(stderr, hopts))
	} else {
		log = slog.New(slog.NewTextHandler(stderr, hopts))
	}

	d, err := decap.New(decap.Options{
		TUN:            *tun,
		IPv6:           *ipv6,
		AllowedSources: allowed,
		CheckLocal:     *checkLocal,
		FixSysctls:     *fixSysctls,
		Logger:         log,
	})
	if err != nil {
		log.Error("cannot start", "err", err)
		return 1
	}
	if len(allowed) == 0 {
		log.Warn("no -allow: packets from any outer source are decapsulated")
	}
	log.Info("running", "version", version, "tun", d.TUN(), "ipv6", *ipv6, "allow", *allow, "check_local", *checkLocal)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if *statsEvery > 0 {
		go func() {
			t := time.NewTicker(*statsEvery)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					logStats(log, "stats", d.Stats())
				}
			}
		}()
	}
	runErr := d.Run(ctx)
	logStats(log, "final stats", d.Stats())
	if err := d.Close(); err != nil {
		log.Error("close", "err", err)
		if runErr == nil {
			runErr = err
		}
	}
	if runErr != nil {
		log.Error("stopped", "err", runErr)
		return 1
	}
	log.Info("stopped")
	return 0
}

// parsePrefixes parses a comma-separated list of prefixes; a bare address
// stands for itself (/32 or /128).
func parsePrefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, err
			}
			if a.Zone() != "" {
				return nil, fmt.Errorf("%q: a zone cannot be matched", f)
			}
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// logStats logs the counters, drops by reason only when nonzero.
func logStats(log *slog.Logger, msg string, s decap.Stats) {
	attrs := []any{"received", s.Received, "decapsulated", s.Decapsulated, "bytes", s.Bytes,
		"completed", s.Completed, "dropped", s.TotalDropped()}
	for r := range decap.NumReasons {
		if n := s.Dropped[r]; n > 0 {
			attrs = append(attrs, "drop_"+r.String(), n)
		}
	}
	log.Info(msg, attrs...)
}
