package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/vipd/vipd/internal/testkit"
	"github.com/vipd/vipd/testbed"
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

	fmt.Printf("\n== requests stream to both VIPs for a few seconds; vipd top, one frame\n")
	stop := stream(bed, 8*time.Second)
	// The rates are sampled every second: wait for a sample that saw the
	// requests on both VIPs.
	testkit.Poll(testkit.Patience, func() bool {
		st, err := v.State()
		if err != nil {
			return false
		}
		n := 0
		for _, vip := range st.VIPs {
			if vip.Rates.NewFlowsPerSec > 0 {
				n++
			}
		}
		return n == len(st.VIPs)
	})
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

// stream sends HTTP requests, each on a new connection, to both VIPs from
// the client, one after the other, until the returned function is called
// or for at most d; that function returns how many were answered and how
// many failed.
func stream(bed *testbed.Bed, d time.Duration) func() (ok, failed int) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var nOK, nFailed int
	for _, url := range []string{"http://198.18.0.100/", "http://198.18.0.101/"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := bed.HTTPClient(2 * time.Second)
			for i := 0; i < 100000 && ctx.Err() == nil; i++ {
				_, err := testbed.Get(ctx, c, url)
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
