package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vipd/vipd/dsr/decap"
)

// version is set at build time: -ldflags "-X main.version=..."
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: vipd-decap [flags]

Receives vipd's DSR packets (IPv4 in IPv4, and GUE on UDP port 6080; with
-ipv6 also IPv6 in IPv6 and GUE over IPv6), strips the outer headers and
delivers the client's packet to this host's stack through a TUN device.
With -vip it also puts the VIPs on lo and sets the ARP sysctls a DSR
backend needs, and undoes that on exit. With -chain it forwards packets
vipd marks with a previous owner, for connections this host does not
have, to that owner. For hosts without the ipip/fou modules; the manual
is vipd-decap(8) ("man vipd-decap"). Needs root, or
CAP_NET_ADMIN and CAP_NET_RAW. SIGTERM or SIGINT stops it. -check prints
what it would do and exits.

-allow is required (-allow any accepts every source), inner packets not
addressed to this host are dropped (-check-local=false delivers them) and
forwarding is off on the TUN (-tun-forwarding leaves it as the host has
it). Before, vipd-decap accepted any source and delivered any destination:
-allow any -check-local=false -tun-forwarding is that behaviour.

flags:
`

// vipList is the -vip flag: repeatable, each value one address or a
// comma-separated list.
type vipList []netip.Addr

func (l vipList) String() string { return commaList(l) }

func (l *vipList) Set(s string) error {
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return err
		}
		if slices.Contains(*l, a) {
			return fmt.Errorf("%v given twice", a)
		}
		*l = append(*l, a)
	}
	return nil
}

// config is what the flags say, validated by parse.
type config struct {
	opts       decap.Options
	allow      string // as given, for the log
	metrics    string // listen address, "" for none
	statsEvery time.Duration
	check      bool
	log        *slog.Logger
}

// run is main without the process: it returns the exit status (0 stopped
// by a signal or -check passed, 1 failed, 2 bad usage), so that tests can
// drive the flags.
func run(args []string, stdout, stderr io.Writer) int {
	cfg, code := parse(args, stdout, stderr)
	if cfg == nil {
		return code
	}
	if cfg.check {
		fmt.Fprint(stdout, plan(cfg))
		return 0
	}
	return serve(cfg)
}

// parse parses and validates the flags. A nil config comes with the exit
// status: 0 after -h or -version, 2 on bad usage.
func parse(args []string, stdout, stderr io.Writer) (*config, int) {
	fs := flag.NewFlagSet("vipd-decap", flag.ContinueOnError)
	fs.SetOutput(stderr)
	tun := fs.String("tun", decap.DefaultTUN, "`name` of the TUN device to create (at most 15 bytes)")
	ipv6 := fs.Bool("ipv6", false, "also decapsulate IPv6: IPv6 in IPv6 (next header 41) and, with -gue-port, GUE over IPv6")
	guePort := fs.Uint("gue-port", decap.DefaultGUEPort, "UDP `port` on which to receive GUE (variant 1: IP directly in UDP), as vipd\nsends for VIPs with encap = \"gue\"; 0 turns GUE off")
	gueSockets := fs.Int("gue-sockets", runtime.GOMAXPROCS(0), "`number` of GUE sockets per family, each read by its own goroutine; the kernel\nspreads flows over them by their ports (default: GOMAXPROCS, the usable CPUs)")
	allow := fs.String("allow", "", "comma-separated `prefixes` (or addresses) of the outer sources to accept,\nnormally vipd's encapsulation addresses (required); \"any\" accepts every source")
	chain := fs.Bool("chain", false, "previous-owner forwarding: a GUE packet with vipd's previous-owner hint that is\nnot a connection start and has no local connection (kernel socket lookup) is\nsent on to the previous owner's GUE port if -chain-peers has it (else dropped);\nwithout it such packets are delivered here")
	chainPeers := fs.String("chain-peers", "", "comma-separated `prefixes` (or addresses) of the other backends: the only\naddresses -chain sends packets to, and accepted as outer sources of chained packets\nonly (-allow governs everything else); -chain needs it")
	chainCache := fs.Int("chain-cache", decap.DefaultChainCache, "`number` of flows whose socket lookup result -chain remembers")
	chainTTL := fs.Duration("chain-cache-ttl", decap.DefaultChainCacheTTL, "how long -chain remembers a lookup result (a SYN forgets it at once)")
	checkLocal := fs.Bool("check-local", true, "drop inner packets whose destination is not an address of this host;\n-check-local=false delivers any (for hosts that take whole prefixes with local routes)")
	tunForwarding := fs.Bool("tun-forwarding", false, "leave IP forwarding on the TUN device as the host's default sets it; without it\nit is off (net.ipv4.conf.TUN.forwarding=0, with -ipv6 IPv6's too) and kept off")
	fixSysctls := fs.Bool("fix-sysctls", false, "set net.ipv4.conf.all.rp_filter=0 if needed (keeping other interfaces'\neffective value), restored on exit; without it vipd-decap refuses to start")
	var vips vipList
	fs.Var(&vips, "vip", "`address` to put on lo (/32, /128) while running; repeatable or comma-separated.\nAlso raises net.ipv4.conf.all.arp_ignore to 1 and arp_announce to 2.\nOn exit it removes the VIPs it added and restores the sysctls it changed")
	metrics := fs.String("metrics", "", "serve Prometheus metrics on http://`addr`/metrics (host:port); empty: none")
	check := fs.Bool("check", false, "validate the flags, print what would be set up, and exit (0 valid, 2 not)\nwithout touching the host")
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
			return nil, 0
		}
		return nil, 2
	}
	bad := func(format string, a ...any) (*config, int) {
		fmt.Fprintf(stderr, "vipd-decap: "+format+"\n", a...)
		return nil, 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "vipd-decap: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return nil, 2
	}
	if *showVersion {
		fmt.Fprintf(stdout, "vipd-decap %s\n", version)
		return nil, 0
	}
	// "any" stands alone: an allow-list with it would be read as a
	// restriction that is none.
	allowAny := strings.TrimSpace(*allow) == "any"
	var allowed []netip.Prefix
	var err error
	if !allowAny {
		if allowed, err = parsePrefixes(*allow); err != nil {
			return bad("-allow: %v (or \"any\", alone)", err)
		}
	}
	peers, err := parsePrefixes(*chainPeers)
	if err != nil {
		return bad("-chain-peers: %v", err)
	}
	if *chain && *guePort == 0 {
		return bad("-chain needs GUE (-gue-port not 0): hints come only over GUE")
	}
	if len(peers) > 0 && !*chain {
		return bad("-chain-peers without -chain: chained packets come only between backends that chain")
	}
	if *chainCache < 1 || *chainCache > decap.MaxChainCache {
		return bad("-chain-cache %d: want 1 to %d", *chainCache, decap.MaxChainCache)
	}
	if *chainTTL <= 0 {
		return bad("-chain-cache-ttl must be positive")
	}
	if *chain && len(peers) == 0 {
		return bad("-chain needs -chain-peers, the other backends' addresses or prefixes: -chain sends a packet " +
			"only to an address in it, so without it every packet to chain would be dropped")
	}
	if *guePort > 65535 {
		return bad("-gue-port %d: a port is at most 65535", *guePort)
	}
	if *gueSockets < 1 || *gueSockets > decap.MaxGUESockets {
		return bad("-gue-sockets %d: want 1 to %d", *gueSockets, decap.MaxGUESockets)
	}
	for _, a := range vips {
		if a.Is6() && !*ipv6 {
			return bad("-vip %v: an IPv6 VIP needs -ipv6, or its packets are never decapsulated", a)
		}
	}
	if *metrics != "" {
		if _, port, err := net.SplitHostPort(*metrics); err != nil || port == "" {
			return bad("-metrics %q: want host:port, e.g. 127.0.0.1:9717 or :9717", *metrics)
		}
	}
	if *statsEvery < 0 {
		return bad("-stats-interval must not be negative")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return bad("-log-level: %v", err)
	}
	hopts := &slog.HandlerOptions{Level: level}
	var log *slog.Logger
	if *logJSON {
		log = slog.New(slog.NewJSONHandler(stderr, hopts))
	} else {
		log = slog.New(slog.NewTextHandler(stderr, hopts))
	}
	cfg := &config{
		opts: decap.Options{
			TUN:            *tun,
			IPv6:           *ipv6,
			GUEPort:        uint16(*guePort),
			GUESockets:     *gueSockets,
			AllowedSources: allowed,
			CheckLocal:     *checkLocal,
			Forwarding:     *tunForwarding,
			Chain:          *chain,
			ChainPeers:     peers,
			ChainCache:     *chainCache,
			ChainCacheTTL:  *chainTTL,
			FixSysctls:     *fixSysctls,
			VIPs:           vips,
			Logger:         log,
		},
		allow:      *allow,
		metrics:    *metrics,
		statsEvery: *statsEvery,
		check:      *check,
		log:        log,
	}
	if err := cfg.opts.Validate(); err != nil {
		return bad("%v", err)
	}
	// Last, so that a more precise complaint about another flag comes
	// first. Empty AllowedSources means any source to package decap:
	// here only "any" says so.
	if !allowAny && len(allowed) == 0 {
		return bad("-allow is required: give vipd's encapsulation source addresses or prefixes " +
			"(e.g. -allow 198.51.100.10,2001:db8::10), or -allow any to accept packets from every source, " +
			"as vipd-decap did by default before (anyone who reaches this host could then have packets of any source delivered to it)")
	}
	return cfg, 0
}

// plan describes what serve would set up with cfg, for -check. It reads
// nothing from the host.
func plan(cfg *config) string {
	o := cfg.opts
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, "  "+format+"\n", a...) }
	fmt.Fprintf(&b, "vipd-decap %s: flags valid; it would:\n", version)
	tunV6 := "IPv6 disabled on it"
	if o.IPv6 {
		tunV6 = "IPv6 enabled on it"
	}
	tun := cmp.Or(o.TUN, decap.DefaultTUN)
	p("create TUN device %s (removed on exit), with net.ipv4.conf.%s.rp_filter=0 and %s", tun, tun, tunV6)
	switch {
	case o.Forwarding:
		p("leave forwarding on %s as the host's default sets it (-tun-forwarding)", tun)
	case o.IPv6:
		p("keep forwarding off on %s (net.ipv4.conf.%s.forwarding=0, net.ipv6.conf.%s.forwarding=0), setting it back if a host-wide write turns it on", tun, tun, tun)
	default:
		p("keep forwarding off on %s (net.ipv4.conf.%s.forwarding=0), setting it back if a host-wide write turns it on", tun, tun)
	}
	if o.FixSysctls {
		p("set net.ipv4.conf.all.rp_filter=0 if it is not, raising other interfaces' rp_filter to its value (-fix-sysctls; restored on exit)")
	} else {
		p("refuse to start if net.ipv4.conf.all.rp_filter is not 0 (no -fix-sysctls)")
	}
	p("receive IPv4 in IPv4 (raw socket, protocol 4)")
	if o.IPv6 {
		p("receive IPv6 in IPv6 (raw socket, next header 41)")
	}
	switch {
	case o.GUEPort == 0:
		p("not receive GUE (-gue-port 0)")
	case o.IPv6:
		p("receive GUE on UDP port %d over IPv4 and IPv6, %s per family", o.GUEPort, socketsText(o.GUESockets))
	default:
		p("receive GUE on UDP port %d over IPv4, %s", o.GUEPort, socketsText(o.GUESockets))
	}
	if len(o.AllowedSources) == 0 {
		p("accept packets from any outer source (-allow any: anyone who reaches this host can have packets of any source delivered to it)")
	} else {
		p("accept outer sources in %v only", o.AllowedSources)
	}
	if o.Chain {
		p("chain hinted packets without a local connection to the previous owner's UDP port %d, from port %d (-chain; lookups remembered for %v, %d flows)", o.GUEPort, o.GUEPort, o.ChainCacheTTL, o.ChainCache)
		p("chain only to previous owners in %v, drop hinted packets for others (-chain-peers)", o.ChainPeers)
		p("accept outer sources in %v for chained packets only", o.ChainPeers)
	} else if o.GUEPort != 0 {
		p("deliver GUE packets with a previous-owner hint here, ignoring the hint (no -chain)")
	}
	if o.CheckLocal {
		p("drop inner packets not addressed to this host (-check-local, the default)")
	} else {
		p("deliver inner packets to any destination (-check-local=false)")
	}
	for _, a := range o.VIPs {
		p("add %v to lo, unless it is there already; remove it on exit if it added it", netip.PrefixFrom(a, a.BitLen()))
	}
	if len(o.VIPs) > 0 {
		p("raise net.ipv4.conf.all.arp_ignore to 1 and net.ipv4.conf.all.arp_announce to 2 where lower (restored on exit)")
	}
	if cfg.metrics != "" {
		p("serve metrics on http://%s/metrics", cfg.metrics)
	}
	if cfg.statsEvery > 0 {
		p("log the counters every %v and on exit", cfg.statsEvery)
	} else {
		p("log the counters on exit")
	}
	return b.String()
}

func socketsText(n int) string {
	if n <= 1 {
		return "1 socket"
	}
	return fmt.Sprintf("%d sockets (SO_REUSEPORT: flows spread by their ports)", n)
}

// serve runs the decapsulator with cfg until a signal or a failure.
func serve(cfg *config) int {
	log := cfg.log
	// The metrics port first: a port in use is found before the host is
	// changed.
	var ln net.Listener
	if cfg.metrics != "" {
		var err error
		if ln, err = net.Listen("tcp", cfg.metrics); err != nil {
			log.Error("cannot start", "err", err)
			return 1
		}
	}
	d, err := decap.New(cfg.opts)
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		log.Error("cannot start", "err", err)
		return 1
	}
	if len(cfg.opts.AllowedSources) == 0 {
		log.Warn("-allow any: packets from any outer source are decapsulated")
		if cfg.opts.Chain {
			log.Warn("-chain with -allow any: anyone can have this host send datagrams to the chain peers' GUE port")
		}
	}
	if !cfg.opts.CheckLocal {
		log.Warn("-check-local=false: inner packets for any destination are delivered to the stack")
	}
	log.Info("running", "version", version, "tun", d.TUN(), "ipv6", cfg.opts.IPv6, "gue_port", cfg.opts.GUEPort, "gue_sockets", cfg.opts.GUESockets,
		"allow", cfg.allow, "chain", cfg.opts.Chain, "chain_peers", commaList(cfg.opts.ChainPeers), "check_local", cfg.opts.CheckLocal,
		"tun_forwarding", cfg.opts.Forwarding, "vips", vipList(cfg.opts.VIPs).String(), "metrics", cfg.metrics)

	sig, stopSig := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stopSig()
	// ctx also ends when Run fails, which stops the helpers below.
	ctx, cancel := context.WithCancel(sig)
	defer cancel()
	var wg sync.WaitGroup
	if ln != nil {
		wg.Go(func() { serveMetrics(ctx, ln, metricsHandler(d.Stats), log) })
	}
	if cfg.statsEvery > 0 {
		wg.Go(func() {
			t := time.NewTicker(cfg.statsEvery)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					logStats(log, "stats", d.Stats())
				}
			}
		})
	}
	runErr := d.Run(ctx)
	cancel()
	wg.Wait()
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

// commaList formats addresses or prefixes comma-separated, as the flags
// take them.
func commaList[T fmt.Stringer](xs []T) string {
	var b strings.Builder
	for i, x := range xs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(x.String())
	}
	return b.String()
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
	attrs := []any{"received", s.Received, "gue", s.GUE, "decapsulated", s.Decapsulated, "bytes", s.Bytes,
		"completed", s.Completed, "dropped", s.TotalDropped()}
	for r := range decap.NumReasons {
		if n := s.Dropped[r]; n > 0 {
			attrs = append(attrs, "drop_"+r.String(), n)
		}
	}
	if s.Hinted > 0 {
		attrs = append(attrs, "hinted", s.Hinted, "hint_lookups", s.Lookups, "hint_cache_hits", s.CacheHits)
		for o := range decap.NumHintOutcomes {
			if n := s.Hints[o]; n > 0 {
				attrs = append(attrs, "hint_"+o.String(), n)
			}
		}
	}
	log.Info(msg, attrs...)
}
