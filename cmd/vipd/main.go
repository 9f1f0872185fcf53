package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/vipd/vipd/config"
)

// version is set at build time: -ldflags "-X main.version=..."
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit status, so that tests
// can drive every flag.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vipd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "configuration `file` (see config.toml.example)")
	check := fs.Bool("check", false, "validate the configuration, print a summary and exit (0 valid, 1 invalid)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage:\n  vipd -config FILE          run the load balancer\n  vipd -check -config FILE   validate FILE and print a summary\n  vipd -version\n\nflags:\n")
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
	if *check {
		fmt.Fprintf(stdout, "%s: OK\n", *cfgPath)
		if err := config.WriteSummary(stdout, cfg); err != nil {
			return 1
		}
		return 0
	}
	fmt.Fprintln(stderr, "vipd: the dataplane is not built yet; only -check works in this version")
	return 1
}
