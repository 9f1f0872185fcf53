//go:build linux

package decap

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// TestGUE is the GUE path end to end: datagrams built as vipd sends them
// (gue4, gue6), from lb to the backend's GUE port, are decapsulated and
// answered by the backend's listener straight to the client, or dropped
// and counted by reason without an answer.
func TestGUE(t *testing.T) {
	r := newRig(t)
	d := r.newDecap(t, Options{
		IPv6:           true,
		GUEPort:        DefaultGUEPort,
		GUESockets:     3,
		AllowedSources: []netip.Prefix{netip.MustParsePrefix("198.18.1.0/28"), netip.MustParsePrefix("2001:2:0:1::/124")},
		CheckLocal:     true,
	})
	run(t, d)
	r.echo(t, netip.AddrPortFrom(vip4, 80))
	r.echo(t, netip.AddrPortFrom(vip6, 80))
	s, c := r.sender(t), r.capture(t)

	syn4 := func(sport uint16) []byte { return tcp4(t, client4, vip4, sport, 80, true, false, 1000, nil) }
	syn6 := func(sport uint16) []byte { return tcp6(t, client6, vip6, sport, 80, true, false, 1000, nil) }
	const port = DefaultGUEPort
	refused := map[uint16]bool{} // client ports of the dropped SYNs
	for _, tc := range []struct {
		name  string
		sport uint16 // the inner SYN's client port
		pkt   func(sport uint16) []byte
		want  Reason // pass: a SYN-ACK to the client
	}{
		{"IPv4", 40001, func(p uint16) []byte { return gue4(t, lbAddr4, beAddr4, 49152, port, syn4(p)) }, pass},
		{"IPv4, another flow's source port", 40002, func(p uint16) []byte { return gue4(t, lbAddr4, beAddr4, 65535, port, syn4(p)) }, pass},
		{"IPv4 with a UDP checksum", 40003, func(p uint16) []byte {
			outer := &layers.IPv4{Version: 4, TTL: 64, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolUDP, SrcIP: ip(lbAddr4), DstIP: ip(beAddr4)}
			u := &layers.UDP{SrcPort: 50000, DstPort: port}
			u.SetNetworkLayerForChecksum(outer)
			return serialize(t, outer, u, gopacket.Payload(syn4(p)))
		}, pass},
		{"IPv6", 40004, func(p uint16) []byte { return gue6(t, lbAddr6, beAddr6, 51234, port, syn6(p)) }, pass},
		{"IPv4 source not allowed", 40011, func(p uint16) []byte { return gue4(t, stranger, beAddr4, 49152, port, syn4(p)) }, DropSource},
		{"IPv6 source not allowed", 40012, func(p uint16) []byte { return gue6(t, stranger6, beAddr6, 49152, port, syn6(p)) }, DropSource},
		{"IPv6 inside IPv4", 40013, func(p uint16) []byte { return gue4(t, lbAddr4, beAddr4, 49152, port, syn6(p)) }, DropInnerVersion},
		{"IPv4 inside IPv6", 40014, func(p uint16) []byte { return gue6(t, lbAddr6, beAddr6, 49152, port, syn4(p)) }, DropInnerVersion},
		{"GUE header (variant 0) without a hint", 40015, func(p uint16) []byte {
			return gue4(t, lbAddr4, beAddr4, 49152, port, append([]byte{0x00, 0x04, 0x00, 0x00}, syn4(p)...))
		}, DropGUEHeader},
		{"IPv4 inner longer than the datagram", 40016, func(p uint16) []byte {
			b := syn4(p)
			return gue4(t, lbAddr4, beAddr4, 49152, port, b[:len(b)-2])
		}, DropInnerLength},
		{"IPv6 inner shorter than the datagram", 40017, func(p uint16) []byte {
			return gue6(t, lbAddr6, beAddr6, 49152, port, append(syn6(p), 0, 0))
		}, DropInnerLength},
		{"IPv4 inner header checksum", 40018, func(p uint16) []byte {
			return gue4(t, lbAddr4, beAddr4, 49152, port, mutate(syn4(p), func(b []byte) { b[8]-- }))
		}, DropInnerChecksum},
		{"IPv4 destination not local", 40019, func(p uint16) []byte {
			return gue4(t, lbAddr4, beAddr4, 49152, port, tcp4(t, client4, netip.MustParseAddr("198.18.0.102"), p, 80, true, false, 1000, nil))
		}, DropNotLocal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := d.Stats()
			s.Send(t, tc.pkt(tc.sport))
			if tc.want == pass {
				vip, client := vip4, client4
				if tc.pkt(tc.sport)[0]>>4 == 6 {
					vip, client = vip6, client6
				}
				c.waitTCP(t, synAckFrom(vip, client, tc.sport))
				waitStats(t, d, "decapsulated", func(s Stats) bool { return s.Decapsulated == before.Decapsulated+1 })
				return
			}
			refused[tc.sport] = true
			st := waitStats(t, d, "drop", func(s Stats) bool { return s.TotalDropped() == before.TotalDropped()+1 })
			if st.Dropped[tc.want] != before.Dropped[tc.want]+1 {
				t.Errorf("drops %v, want one more %v than %v", st.Dropped, tc.want, before.Dropped)
			}
		})
	}
	// No answer to a refused SYN: the SYN-ACK to this last one is the
	// first thing captured after them.
	s.Send(t, gue4(t, lbAddr4, beAddr4, 49152, port, syn4(40099)))
	c.waitTCP(t, func(nl gopacket.NetworkLayer, tcp *layers.TCP) bool {
		if tcp.SYN && tcp.ACK && refused[uint16(tcp.DstPort)] {
			t.Errorf("answer to a refused packet: port %d", tcp.DstPort)
		}
		return synAckFrom(vip4, client4, 40099)(nl, tcp)
	})
	st := waitStats(t, d, "all counted", func(s Stats) bool { return s.Received == s.Decapsulated+s.TotalDropped() })
	if st.GUE != st.Received {
		t.Errorf("GUE %d of %d received, want all", st.GUE, st.Received)
	}
	// The open GUE sockets count as the port's listeners: the kernel
	// neither counts the datagrams as to no port nor answers vipd with
	// ICMP "port unreachable".
	if n := r.BE.SNMP(t, "Udp", "NoPorts"); n != 0 {
		t.Errorf("Udp NoPorts = %d, want 0", n)
	}
	if n := r.BE.SNMP(t, "Icmp", "OutDestUnreachs"); n != 0 {
		t.Errorf("Icmp OutDestUnreachs = %d, want 0", n)
	}
	if n := r.BE.SNMP(t, "Udp6", "NoPorts"); n != 0 {
		t.Errorf("Udp6NoPorts = %d, want 0", n)
	}
}

// TestGUEChecksum6: over IPv6 the kernel checks the UDP checksum before
// the GUE socket sees the datagram, so a corrupted one is counted by the
// kernel (Udp6InCsumErrors), never by Decap.
func TestGUEChecksum6(t *testing.T) {
	r := newRig(t)
	d := r.newDecap(t, Options{IPv6: true, GUEPort: DefaultGUEPort})
	run(t, d)
	r.echo(t, netip.AddrPortFrom(vip6, 80))
	s, c := r.sender(t), r.capture(t)
	bad := gue6(t, lbAddr6, beAddr6, 49152, DefaultGUEPort, tcp6(t, client6, vip6, 40001, 80, true, false, 1000, nil))
	bad[len(bad)-1] ^= 0xff // the last byte of the inner TCP header: only the UDP checksum notices
	s.Send(t, bad)
	s.Send(t, gue6(t, lbAddr6, beAddr6, 49152, DefaultGUEPort, tcp6(t, client6, vip6, 40002, 80, true, false, 1000, nil)))
	c.waitTCP(t, synAckFrom(vip6, client6, 40002))
	if st := waitStats(t, d, "one received", func(s Stats) bool { return s.Decapsulated == 1 }); st.Received != 1 {
		t.Errorf("received %d, want 1 (the corrupted datagram must not reach the socket): %+v", st.Received, st)
	}
	if n := r.BE.SNMP(t, "Udp6", "InCsumErrors"); n != 1 {
		t.Errorf("Udp6InCsumErrors = %d, want 1", n)
	}
}

// TestGUEPortInUse: a GUE port another socket holds makes New fail and
// say so, leaving nothing behind — also when both want a group of
// sockets, which the kernel would otherwise let the second one join.
func TestGUEPortInUse(t *testing.T) {
	for _, tc := range []struct{ first, second int }{{1, 1}, {1, 4}, {4, 1}, {4, 4}} {
		t.Run(fmt.Sprintf("%d then %d sockets", tc.first, tc.second), func(t *testing.T) {
			r := newRig(t)
			r.newDecap(t, Options{TUN: "vtun-gue1", GUEPort: 6081, GUESockets: tc.first})
			err := r.BE.Do(func() error {
				d, err := New(Options{TUN: "vtun-gue2", GUEPort: 6081, GUESockets: tc.second})
				if err == nil {
					d.Close()
				}
				return err
			})
			if err == nil || !strings.Contains(err.Error(), "GUE port 6081 is in use") {
				t.Errorf("second New on the same GUE port: %v, want an error saying the port is in use", err)
			}
			if l := links(t, r.BE); strings.Contains(l, "vtun-gue2") {
				t.Errorf("failed New left its TUN: links %q", l)
			}
		})
	}
}

// TestGUESpread: with several GUE sockets, the kernel spreads flows
// (datagrams with different source ports, as vipd sends them) over the
// sockets, and keeps each flow on one socket.
func TestGUESpread(t *testing.T) {
	r := newRig(t)
	const sockets, flows, perFlow = 4, 32, 3
	d := r.newDecap(t, Options{GUEPort: DefaultGUEPort, GUESockets: sockets, IPv6: true})
	var gue []*receiver
	for _, rx := range d.rx {
		if rx.kind == kindGUE {
			gue = append(gue, rx)
		}
	}
	if len(gue) != 2*sockets {
		t.Fatalf("%d GUE sockets, want %d per family", len(gue), sockets)
	}
	s := r.sender(t)
	for i := range flows {
		sport := uint16(49152 + i*509) // spread over vipd's range
		for range perFlow {
			s.Send(t, gue4(t, lbAddr4, beAddr4, sport, DefaultGUEPort, tcp4(t, client4, vip4, uint16(40000+i), 81, true, false, 1, nil)))
		}
	}
	// Without Run, the datagrams wait in the sockets: read each dry, and
	// go round again until all are read or replyTimeout passes (delivery
	// can lag the sends on a loaded machine).
	bySocket := map[int]int{}      // IPv4 socket index -> datagrams
	flowSocket := map[uint16]int{} // inner client port -> socket index
	total := 0
	for end := time.Now().Add(replyTimeout); total < flows*perFlow && time.Now().Before(end); {
		for i, rx := range gue[:sockets] {
			for {
				rx.f.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
				n, err := rx.rd.read(rx.rc)
				if err != nil {
					break
				}
				pkt := rx.rd.buf[:n]
				port := uint16(pkt[20])<<8 | uint16(pkt[21])
				if j, ok := flowSocket[port]; ok && j != i {
					t.Errorf("flow from port %d on sockets %d and %d", port, j, i)
				}
				flowSocket[port] = i
				bySocket[i]++
				total++
			}
		}
	}
	// None more: one more read of each socket finds nothing.
	for _, rx := range gue[:sockets] {
		rx.f.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := rx.rd.read(rx.rc); err == nil {
			total++
		}
	}
	t.Logf("datagrams per socket: %v", bySocket)
	if total != flows*perFlow {
		t.Errorf("%d datagrams read, want %d", total, flows*perFlow)
	}
	if len(bySocket) < 2 {
		t.Errorf("all %d flows on one socket: %v", flows, bySocket)
	}
}
