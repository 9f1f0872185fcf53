package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/vipd/vipd/admin"
	"github.com/vipd/vipd/admin/client"
)

// clearScreen moves the cursor home and clears the terminal (ANSI).
const clearScreen = "\x1b[H\x1b[2J"

// top redraws the rates of /v1/state every -interval until Ctrl-C, or -n
// times.
func top(args []string, stdout, stderr io.Writer) int {
	fs, addrFlag, cfgFlag := adminFlags("top", stderr)
	n := fs.Int("n", 0, "stop after `N` frames (0: until Ctrl-C)")
	interval := fs.Duration("interval", time.Second, "time between frames")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 || *interval <= 0 {
		fmt.Fprintln(stderr, "usage: vipd top [-n N] [-interval D] [-admin ADDR | -config FILE]")
		return 2
	}
	addr, err := adminAddr(*addrFlag, *cfgFlag, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "vipd top: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t := time.NewTicker(*interval)
	defer t.Stop()
	for i := 0; *n == 0 || i < *n; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return 0
			case <-t.C:
			}
		}
		st, err := client.FetchState(ctx, addr)
		if err != nil {
			if ctx.Err() != nil {
				return 0
			}
			fmt.Fprintf(stderr, "vipd top: %v\n", err)
			return 1
		}
		fmt.Fprint(stdout, clearScreen)
		if err := admin.WriteTop(stdout, st, time.Now()); err != nil {
			return 1
		}
	}
	return 0
}
