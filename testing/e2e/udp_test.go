package e2e

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/testing/testbed"
)

// TestUDP: request/response datagrams from many source ports are balanced
// over the backends and answered, from the VIP.
func TestUDP(t *testing.T) {
	for _, io := range drivers {
		t.Run(io, func(t *testing.T) {
			e := setup(t, testbed.Options{}, testbed.ConfigOptions{IO: io})
			const n = 300
			counts := map[string]int{}
			vip := &net.UDPAddr{IP: net.IP(testbed.VIPUDP.AsSlice()), Port: 7000}
			for i := 0; i < n; i++ {
				pc, err := testbed.ListenPacket(e.bed.Client, "udp4", ":0")
				if err != nil {
					t.Fatal(err)
				}
				answered := false
				// UDP: a lost datagram is retried. A late answer to a try
				// answers the next one just as well (the same text).
				for try := 0; try < 3 && !answered; try++ {
					pc.WriteTo([]byte(fmt.Sprintf("ping %d", i)), vip)
					pc.SetReadDeadline(time.Now().Add(5 * time.Second))
					buf := make([]byte, 256)
					k, from, err := pc.ReadFrom(buf)
					if err != nil {
						continue
					}
					if from.String() != vip.String() {
						t.Fatalf("answer from %v, want the VIP %v", from, vip)
					}
					name, msg, _ := strings.Cut(string(buf[:k]), ":")
					if msg != fmt.Sprintf("ping %d", i) {
						t.Fatalf("answer %q to ping %d", buf[:k], i)
					}
					counts[name]++
					answered = true
				}
				pc.Close()
				if !answered {
					t.Fatalf("datagram %d never answered", i)
				}
			}
			checkShares(t, counts, map[string]int{"backend1": 1, "backend2": 1, "backend3": 1}, n)
		})
	}
}
