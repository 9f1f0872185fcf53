package dataplane

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket/layers"
)

// TestHandshakeCounters: a backend's Handshakes count the tracked TCP
// flows that began with a SYN (and a closed tuple reused by a SYN); its
// Answered, in NAT mode the SYN-ACKs it sent through vipd, in DSR mode
// the flows whose client went on past its SYNs; a retransmitted SYN, a
// flow picked up mid-stream and UDP count neither. The time from the
// first SYN to the answer, on the batches' clocks, goes into the
// histogram.
//
// Steps: TCP flags of a client packet, "<SA" the backend's SYN-ACK to the
// client (to the backend the flow went to), "+D" the clock moved on by
// duration D.
func TestHandshakeCounters(t *testing.T) {
	for _, tc := range []struct {
		name                string
		vip                 netip.Addr
		steps               []string
		handshakes, answers uint64
		times               []time.Duration // the histogram's samples
	}{
		{"NAT answered", vipNAT4, []string{"S", "+3ms", "<SA", "+1ms", "A", "PA"}, 1, 1, []time.Duration{3 * time.Millisecond}},
		{"NAT IPv6", vipNAT6, []string{"S", "+40ms", "<SA", "A"}, 1, 1, []time.Duration{40 * time.Millisecond}},
		{"NAT from the first SYN", vipNAT4, []string{"S", "+1s", "S", "+10ms", "<SA", "A"}, 1, 1, []time.Duration{1010 * time.Millisecond}},
		{"NAT SYN-ACK sent again", vipNAT4, []string{"S", "<SA", "+1s", "<SA", "A"}, 1, 2, []time.Duration{0}},
		{"NAT client goes on without a SYN-ACK seen", vipNAT4, []string{"S", "A", "PA"}, 1, 0, nil},
		{"NAT never answered", vipNAT4, []string{"S", "S", "S"}, 1, 0, nil},
		{"NAT reset by the client after its SYN", vipNAT4, []string{"S", "R"}, 1, 0, nil},
		{"NAT answered late", vipNAT4, []string{"S", "+4s", "<SA"}, 1, 1, []time.Duration{4 * time.Second}},
		{"mid-stream", vipNAT4, []string{"A", "PA"}, 0, 0, nil},
		{"tuple reused", vipNAT4, []string{"S", "<SA", "A", "FA", "+2ms", "S", "+5ms", "<SA", "A"}, 2, 2, []time.Duration{0, 5 * time.Millisecond}},
		{"DSR", vipDSR4, []string{"S", "+7ms", "A", "+1s", "PA"}, 1, 1, []time.Duration{7 * time.Millisecond}},
		{"DSR after a retransmission", vipDSR4, []string{"S", "+1s", "S", "+1ms", "A"}, 1, 1, []time.Duration{1001 * time.Millisecond}},
		{"DSR IPv6", vipDSR6, []string{"S", "+20ms", "A"}, 1, 1, []time.Duration{20 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testSpec())
			client := client4
			if tc.vip.Is6() {
				client = client6
			}
			var be netip.AddrPort // where the flow went (NAT)
			for _, st := range tc.steps {
				switch {
				case st[0] == '+':
					d, err := time.ParseDuration(st[1:])
					if err != nil {
						t.Fatal(err)
					}
					h.now += int64(d)
				case st == "<SA":
					d := h.runOn(PortEgress, build(t, pk{src: be.Addr(), dst: client, sport: be.Port(), dport: 4000, flags: "SA", srcMAC: macOf(1)}))
					if d.Verdict != VerdictTX || d.Port != PortIngress {
						t.Fatalf("SYN-ACK from %v: %v port %d %v", be, d.Verdict, d.Port, d.Reason)
					}
				default:
					d := h.run(build(t, pk{src: client, dst: tc.vip, sport: 4000, dport: 80, flags: st}))[0]
					if d.Verdict != VerdictTX {
						t.Fatalf("%s: %v %v", st, d.Verdict, d.Reason)
					}
					if strings.Contains(st, "S") && !strings.Contains(st, "A") {
						be = natDest(t, d.frame())
					}
				}
			}
			var hs, an, nanos, n uint64
			var hist [numHandshakeBuckets]uint64
			for _, b := range h.w.Counters().Backends {
				hs += b.Handshakes
				an += b.Answered
				nanos += b.HandshakeNanos
				for i, c := range b.HandshakeTime {
					hist[i] += c
					n += c
				}
			}
			if hs != tc.handshakes || an != tc.answers {
				t.Errorf("handshakes %d answered %d, want %d and %d", hs, an, tc.handshakes, tc.answers)
			}
			var want [numHandshakeBuckets]uint64
			var sum uint64
			for _, d := range tc.times {
				i := 0
				for i < len(HandshakeBuckets) && int64(d) > HandshakeBuckets[i] {
					i++
				}
				want[i]++
				sum += uint64(d)
			}
			if hist != want || nanos != sum {
				t.Errorf("handshake times %v (sum %d ns), want %v (sum %d ns)", hist, nanos, want, sum)
			}
		})
	}
}

// natDest is the destination of the NAT'ed frame (the backend: TCP or
// UDP); the zero AddrPort for an encapsulated one.
func natDest(t *testing.T, frame []byte) netip.AddrPort {
	p := decode(t, frame)
	var dst netip.Addr
	var proto layers.IPProtocol
	if ip, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok {
		dst, proto = addrOf(ip.DstIP), ip.Protocol
	} else if ip, ok := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6); ok {
		dst, proto = addrOf(ip.DstIP), ip.NextHeader
	}
	switch proto {
	case layers.IPProtocolTCP:
		tcp, _ := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
		return netip.AddrPortFrom(dst, uint16(tcp.DstPort))
	case layers.IPProtocolUDP:
		udp, _ := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
		return netip.AddrPortFrom(dst, uint16(udp.DstPort))
	}
	return netip.AddrPort{}
}

// TestStopwatch: a start is claimed once, by its own flow and backend; a
// later start of another flow in its slot takes it.
func TestStopwatch(t *testing.T) {
	s := NewStopwatch(4)
	if len(s.slots) != 4 {
		t.Fatalf("%d slots, want 4", len(s.slots))
	}
	var a, b [16]byte
	a[0], b[0] = 1, 2
	ka := watchKey(&a, 1000, 1)
	kb := ka&s.mask | watchKey(&b, 1000, 1)&^s.mask // the same slot
	s.start(ka, 7, 100)
	if _, ok := s.stop(ka, 8); ok {
		t.Error("claimed by another backend")
	}
	if _, ok := s.stop(kb, 7); ok {
		t.Error("claimed by another flow")
	}
	if at, ok := s.stop(ka, 7); !ok || at != 100 {
		t.Errorf("stop: %d %v, want 100 true", at, ok)
	}
	if _, ok := s.stop(ka, 7); ok {
		t.Error("claimed twice")
	}
	s.start(ka, 7, 200)
	s.start(kb, 7, 300)
	if _, ok := s.stop(ka, 7); ok {
		t.Error("a start that another took was claimed")
	}
	if at, ok := s.stop(kb, 7); !ok || at != 300 {
		t.Errorf("stop: %d %v, want 300 true", at, ok)
	}
	if k1, k2 := watchKey(&a, 1000, 1), watchKey(&a, 1001, 1); k1 == k2 {
		t.Error("two ports, one key")
	}
	if k1, k2 := watchKey(&a, 1000, 1), watchKey(&a, 1000, 2); k1 == k2 {
		t.Error("two VIPs, one key")
	}
}
