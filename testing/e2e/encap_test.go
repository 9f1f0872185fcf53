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

	"github.com/vipd/vipd/testing/testbed"
)

// TestDSREncap sends the DSR VIP's traffic in each encapsulation that
// spreads a backend's flows over its NIC's receive queues (plain IP in
// IP from one address puts them all on one queue, one CPU) — GUE, and
// IP in IP from a per-flow source of a prefix — and in plain IP in IP.
// Every request must be answered by the backends' vipd-decap, and
// copies of what reaches one backend (a raw socket of the tunnel's
// protocol beside vipd-decap's) show the encapsulation and its spread:
// GUE datagrams to port 6080 from several source ports, IPIP packets
// from several addresses of the prefix and none outside it; and the
// receive queues a NIC's Toeplitz RSS would give them, at least 2 of 4
// with each option, exactly 1 without.
func TestDSREncap(t *testing.T) {
	pf := netip.MustParsePrefix("198.18.1.0/29") // the box's egress address and 7 more, no backend's
	for _, tc := range []struct {
		name  string
		keys  string
		proto string // raw socket protocol that sees the tunnel
	}{
		{"gue", "encap = \"gue\"\n", "ip4:17"},
		{"ipip per-flow source", "encap_source_prefix = \"" + pf.String() + "\"\n", "ip4:4"},
		{"ipip", "", "ip4:4"},
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
			// The receive queues a NIC would use: Toeplitz RSS with the
			// common default key over 4 queues, on the outer addresses
			// (IPIP) or addresses and ports (UDP, with 4-tuple hashing
			// for UDP on, which GUE needs). veth cannot show this: its
			// receive queue is the sender's transmit queue, and Linux's
			// own flow hash looks inside IPIP.
			queues := seen.rssQueues(4)
			t.Logf("%s at backend1: %d outer sources, %d source ports, RSS queues %v", tc.name, srcs, ports, queues)
			if tc.keys == "" {
				if len(queues) != 1 {
					t.Errorf("plain IPIP landed on RSS queues %v, want one", queues)
				}
				if srcs != 1 {
					t.Errorf("plain IPIP from %d outer sources, want 1", srcs)
				}
				return
			}
			if len(queues) < 2 {
				t.Errorf("%s landed on RSS queues %v, want at least 2 of 4", tc.name, queues)
			}
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
// of the tunnel packets one backend receives, and the outer 4-tuples
// (ports 0 for IPIP) for RSS.
type outerLog struct {
	mu     sync.Mutex
	srcs   map[netip.Addr]int
	ports  map[uint16]int
	tuples map[[12]byte]int // src, dst, sport, dport
}

// rssQueues returns the queues (of n) a NIC with Toeplitz RSS and the
// common default key would put the recorded outer tuples on, with their
// packet counts.
func (o *outerLog) rssQueues(n int) map[int]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	q := map[int]int{}
	for tup, c := range o.tuples {
		in := tup[:8]
		if tup[8]|tup[9]|tup[10]|tup[11] != 0 {
			in = tup[:]
		}
		q[int(toeplitz(in)%uint32(n))] += c
	}
	return q
}

// rssKey is the 40-byte Toeplitz key most NIC drivers default to (the one
// Microsoft's RSS specification gives).
var rssKey = [40]byte{
	0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
	0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
	0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
}

// toeplitz is the RSS hash of in (network-order fields): for every set
// bit of the input, XOR in the 32 key bits that start at its position.
func toeplitz(in []byte) uint32 {
	var h uint32
	for i, b := range in {
		for j := 0; j < 8; j++ {
			if b&(0x80>>j) == 0 {
				continue
			}
			bit := i*8 + j
			var w uint32
			for k := 0; k < 32; k++ {
				kb := bit + k
				if rssKey[kb/8]&(0x80>>(kb%8)) != 0 {
					w |= 1 << (31 - k)
				}
			}
			h ^= w
		}
	}
	return h
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
	o.srcs, o.ports, o.tuples = map[netip.Addr]int{}, map[uint16]int{}, map[[12]byte]int{}
	dst := be.Addr.As4()
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
			var tup [12]byte
			src := a.As4()
			copy(tup[0:4], src[:])
			copy(tup[4:8], dst[:])
			o.mu.Lock()
			if proto == "ip4:17" {
				if n >= 8 && binary.BigEndian.Uint16(buf[2:]) == 6080 {
					o.srcs[a]++
					o.ports[binary.BigEndian.Uint16(buf[0:])]++
					copy(tup[8:12], buf[0:4])
					o.tuples[tup]++
				}
			} else {
				o.srcs[a]++
				o.tuples[tup]++
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

// TestToeplitz checks the RSS hash against the verification suite of
// Microsoft's RSS specification (IPv4, 2-tuple and 4-tuple).
func TestToeplitz(t *testing.T) {
	for _, tc := range []struct {
		src, dst     string
		sport, dport uint16
		two, four    uint32
	}{
		{"66.9.149.187", "161.142.100.80", 2794, 1766, 0x323e8fc2, 0x51ccc178},
		{"199.92.111.2", "65.69.140.83", 14230, 4739, 0xd718262a, 0xc626b0ea},
		{"24.19.198.95", "12.22.207.184", 12898, 38024, 0xd2d0a5de, 0x5c2b394a},
	} {
		s, d := netip.MustParseAddr(tc.src).As4(), netip.MustParseAddr(tc.dst).As4()
		in := append(append(append([]byte{}, s[:]...), d[:]...), byte(tc.sport>>8), byte(tc.sport), byte(tc.dport>>8), byte(tc.dport))
		if h := toeplitz(in[:8]); h != tc.two {
			t.Errorf("%s -> %s: 2-tuple %#08x, want %#08x", tc.src, tc.dst, h, tc.two)
		}
		if h := toeplitz(in); h != tc.four {
			t.Errorf("%s -> %s: 4-tuple %#08x, want %#08x", tc.src, tc.dst, h, tc.four)
		}
	}
}
