package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/vipd/vipd/testing/testbed"
	"github.com/vipd/vipd/testing/testkit"
)

// dayToDay is the operator's act: a backend's server dies and vipd status
// says why; a weight changes at run time; vipd top shows the rates while
// requests stream; vipd conns lists flows. Every command is the real CLI,
// run in the box's namespace against the running vipd.
func dayToDay(r *testbed.Run, bed *testbed.Bed, v *testbed.VIPD) {
	victim := bed.Backends[2]
	fmt.Printf("\n== day to day: %s's server killed; vipd status says why it is down\n", victim.Name)
	victim.Kill()
	down := testkit.Poll(testkit.Patience, func() bool {
		st, err := v.State()
		if err != nil {
			return false
		}
		for _, vip := range st.VIPs {
			for _, b := range vip.Backends {
				if b.Address == victim.Addr.String() && b.Health != "down" {
					return false
				}
			}
		}
		return true
	})
	if !down {
		fmt.Printf("   (vipd did not mark it down within %v)\n", testkit.Patience)
	}
	cli(r, bed, "status")

	fmt.Printf("\n== a run-time change, the file untouched: backend1 of the NAT VIP at weight 5 (the file says 2)\n")
	cli(r, bed, "weight", "-socket", bed.AdminSocket(), "web-nat", "198.18.1.11", "5")

	fmt.Printf("\n== requests stream to both VIPs; vipd top, one frame, while they do\n")
	// Bounded, and long enough to outlast the wait below: stopped once
	// vipd top and vipd conns have printed.
	stop := stream(bed, 2*testkit.Patience)
	// The rates are sampled every second: wait for a sample that saw the
	// requests on the VIPs they go to (the example's QUIC VIP gets none).
	if !testkit.Poll(testkit.Patience, func() bool { return streaming(v) }) {
		fmt.Printf("   (vipd's rates showed no requests on both VIPs within %v)\n", testkit.Patience)
	}
	cli(r, bed, "top", "-n", "1")
	fmt.Printf("\n== the connection table: vipd conns web-dsr -limit 5\n")
	cli(r, bed, "conns", "-limit", "5", "web-dsr")
	ok, failed := stop()
	fmt.Printf("   (the stream: %d requests answered, %d failed)\n", ok, failed)
	victim.Start()
}

// cli runs vipd's command line in the box and prints the command and its
// output, without the terminal codes vipd top clears the screen with.
func cli(r *testbed.Run, bed *testbed.Bed, args ...string) {
	shown := strings.Join(args, " ")
	shown = strings.Replace(shown, bed.AdminSocket(), "$BED/admin.sock", 1)
	fmt.Printf("$ vipd %s\n", shown)
	out := bed.Box.Must(r, append([]string{bed.Bin.VIPD}, args...)...)
	out = strings.ReplaceAll(out, "\x1b[H\x1b[2J", "")
	fmt.Print(strings.TrimRight(out, "\n") + "\n")
}

// streamed are the VIPs of config.toml.example that stream sends
// requests to, by name.
var streamed = []struct{ name, url string }{
	{"web-nat", "http://198.18.0.100/"},
	{"web-dsr", "http://198.18.0.101/"},
}

// streaming reports whether vipd's last rate sample saw new flows and
// packets on every VIP in streamed.
func streaming(v *testbed.VIPD) bool {
	st, err := v.State()
	if err != nil {
		return false
	}
	seen := 0
	for _, vip := range st.VIPs {
		for _, s := range streamed {
			if vip.Name == s.name && vip.Rates.NewFlowsPerSec > 0 && vip.Rates.PacketsPerSec > 0 {
				seen++
			}
		}
	}
	return seen == len(streamed)
}

// stream sends HTTP requests, each on a new connection, to the VIPs in
// streamed from the client, one after the other on each, until the
// returned function is called or for at most d; that function returns how
// many were answered and how many failed.
func stream(bed *testbed.Bed, d time.Duration) func() (ok, failed int) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var nOK, nFailed int
	for _, vip := range streamed {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := bed.HTTPClient(2 * time.Second)
			for i := 0; i < 100000 && ctx.Err() == nil; i++ {
				_, err := testbed.Get(ctx, c, vip.url)
				mu.Lock()
				if err == nil {
					nOK++
				} else if ctx.Err() == nil {
					nFailed++
				}
				mu.Unlock()
			}
		}()
	}
	return func() (int, int) {
		cancel()
		wg.Wait()
		return nOK, nFailed
	}
}
