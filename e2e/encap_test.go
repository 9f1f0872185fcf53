package e2e

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/vipd/vipd/testbed"
)

// TestDSREncap sends the DSR VIP's traffic in each encapsulation that
// spreads a backend's flows (issue 15): GUE, and IP in IP from a per-flow
// source of a prefix. Every request must be answered by the backends'
// vipd-decap, and copies of what reaches one backend (a raw socket of the
// tunnel's protocol beside vipd-decap's) show the encapsulation and its
// spread: GUE datagrams to port 6080 from several source ports, or IPIP
// packets from several addresses of the prefix and none outside it.
func TestDSREncap(t *testing.T) {
	pf := netip.MustParsePrefix("198.18.1.0/29") // the box's egress address and 7 more, no backend's
	for _, tc := range []struct {
		name  string
		keys  string
		proto string // raw socket protocol that sees the tunnel
	}{
		{"gue", "encap = \"gue\"\n", "ip4:17"},
		{"ipip per-flow source", "encap_source_prefix = \"" + pf.String() + "\"\n", "ip4:4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t, testbed.Options{}, testbed.ConfigOptions{DSREncap: tc.keys})
			be := e.bed.Backends[0]
			seen := &outerLog{}
			stop := seen.capture(t, be, tc.proto)
			const n = 150
			checkShares(t, e.names(dsrURL, n), map[string]int{"backend1": 1, "backend2": 1, "backend3": 1}, n)
			stop()
			srcs, ports := seen.counts()
			switch tc.proto {
			case "ip4:17":
				if ports < 8 {
					t.Errorf("GUE reached backend1 from %d distinct source ports for ~%d connections, want spread", ports, n/3)
				}
				if srcs != 1 {
					t.Errorf("GUE from %d outer sources, want the one encap_source", srcs)
				}
			default:
				if srcs < 4 {
					t.Errorf("IPIP reached backend1 from %d distinct outer sources of %v, want spread", srcs, pf)
				}
				for a := range seen.srcs {
					if !pf.Contains(a) {
						t.Errorf("outer source %v outside %v", a, pf)
					}
				}
			}
		})
	}
}

// outerLog records the outer source addresses and (GUE) UDP source ports
// of the tunnel packets one backend receives.
type outerLog struct {
	mu    sync.Mutex
	srcs  map[netip.Addr]int
	ports map[uint16]int
}

func (o *outerLog) counts() (srcs, ports int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.srcs), len(o.ports)
}

// capture opens a raw socket of protocol proto ("ip4:4" or "ip4:17") in
// the backend's namespace, which gets a copy of every such packet, and
// records them until the returned stop is called (or 60 s pass). UDP
// datagrams count only when sent to the GUE port.
func (o *outerLog) capture(t *testing.T, be *testbed.Backend, proto string) (stop func()) {
	t.Helper()
	o.srcs, o.ports = map[netip.Addr]int{}, map[uint16]int{}
	pc, err := testbed.ListenPacket(be.NS, proto, "0.0.0.0")
	if err != nil {
		t.Fatalf("raw socket in %s: %v", be.Name, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			pc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			n, addr, err := pc.ReadFrom(buf)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				continue
			}
			if err != nil {
				return // closed by stop
			}
			a, ok := netip.AddrFromSlice(addr.(*net.IPAddr).IP.To4())
			if !ok {
				continue
			}
			o.mu.Lock()
			if proto == "ip4:17" {
				if n >= 8 && binary.BigEndian.Uint16(buf[2:]) == 6080 {
					o.srcs[a]++
					o.ports[binary.BigEndian.Uint16(buf[0:])]++
				}
			} else {
				o.srcs[a]++
			}
			o.mu.Unlock()
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			pc.Close()
			<-done
		})
	}
	t.Cleanup(stop)
	return stop
}
