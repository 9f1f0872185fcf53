package decap

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vipd/vipd/packet"
)

// guePayload returns what the GUE socket reads of a datagram built by
// gue4 or gue6: the UDP payload, after checking with gopacket that the
// datagram is the wire format vipd sends.
func guePayload(tb testing.TB, pkt []byte) []byte {
	tb.Helper()
	first := layers.LayerTypeIPv4
	if pkt[0]>>4 == 6 {
		first = layers.LayerTypeIPv6
	}
	p := gopacket.NewPacket(pkt, first, gopacket.Default)
	u, _ := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
	if u == nil || u.DstPort != DefaultGUEPort || int(u.Length) != len(u.LayerContents())+len(u.LayerPayload()) {
		tb.Fatalf("not a GUE datagram to port %d: %v", DefaultGUEPort, p)
	}
	return u.LayerPayload()
}

func TestStripGUE(t *testing.T) {
	syn4 := tcp4(t, client4, vip4, 40000, 80, true, false, 1, nil)
	syn6 := tcp6(t, client6, vip6, 40000, 80, true, false, 1, nil)
	data4 := tcp4(t, client4, vip4, 40000, 80, false, true, 2, bytes.Repeat([]byte("x"), 1000))
	allow := []netip.Prefix{netip.MustParsePrefix("198.18.1.0/28"), netip.MustParsePrefix("2001:2:0:1::/124")}
	g4 := func(inner []byte) []byte {
		return guePayload(t, gue4(t, lbAddr4, beAddr4, 50000, DefaultGUEPort, inner))
	}
	g6 := func(inner []byte) []byte {
		return guePayload(t, gue6(t, lbAddr6, beAddr6, 50000, DefaultGUEPort, inner))
	}
	// A GUE header (variant 0) without vipd's hint: version 00, C 0,
	// Hlen 0, proto/ctype 4 (IPIP), flags 0 — then the inner packet.
	variant0 := append([]byte{0x00, 0x04, 0x00, 0x00}, syn4...)
	for _, tc := range []struct {
		name       string
		payload    []byte
		src        netip.Addr
		allowed    []netip.Prefix
		checkLocal bool
		want       Reason
		inner      []byte // the expected inner packet when want is pass (default: payload)
		completed  uint64
	}{
		{name: "IPv4 SYN", payload: g4(syn4), src: lbAddr4, want: pass},
		{name: "IPv4 data", payload: g4(data4), src: lbAddr4, want: pass},
		{name: "IPv6 SYN", payload: g6(syn6), src: lbAddr6, want: pass},
		{name: "allowed IPv4 source", payload: g4(syn4), src: lbAddr4, allowed: allow, want: pass},
		{name: "allowed IPv6 source", payload: g6(syn6), src: lbAddr6, allowed: allow, want: pass},
		{name: "local destinations", payload: g4(syn4), src: lbAddr4, checkLocal: true, want: pass},
		{name: "IPv4 source not allowed", payload: g4(syn4), src: stranger, allowed: allow, want: DropSource},
		{name: "IPv6 source not allowed", payload: g6(syn6), src: stranger6, allowed: allow, want: DropSource},
		{name: "empty", payload: nil, src: lbAddr4, want: DropMalformed},
		{name: "GUE header (variant 0) without a hint", payload: variant0, src: lbAddr4, want: DropGUEHeader},
		{name: "reserved variant 2", payload: mutate(syn4, func(b []byte) { b[0] = 0x85 }), src: lbAddr4, want: DropGUEVariant},
		{name: "reserved variant 3", payload: mutate(syn4, func(b []byte) { b[0] = 0xc5 }), src: lbAddr4, want: DropGUEVariant},
		{name: "variant 1, version 5", payload: mutate(syn4, func(b []byte) { b[0] = 0x55 }), src: lbAddr4, want: DropInnerVersion},
		{name: "IPv6 inside IPv4", payload: syn6, src: lbAddr4, want: DropInnerVersion},
		{name: "IPv4 inside IPv6", payload: syn4, src: lbAddr6, want: DropInnerVersion},
		{name: "IPv4 inner header truncated", payload: syn4[:12], src: lbAddr4, want: DropInnerLength},
		{name: "IPv4 inner longer than the payload", payload: syn4[:len(syn4)-1], src: lbAddr4, want: DropInnerLength},
		{name: "IPv4 inner shorter than the payload", payload: append(bytes.Clone(syn4), 0), src: lbAddr4, want: DropInnerLength},
		{name: "IPv6 inner longer than the payload", payload: syn6[:len(syn6)-1], src: lbAddr6, want: DropInnerLength},
		{name: "IPv6 inner shorter than the payload", payload: append(bytes.Clone(syn6), 0), src: lbAddr6, want: DropInnerLength},
		{name: "IPv4 inner header checksum", payload: mutate(syn4, func(b []byte) { b[8]-- }), src: lbAddr4, want: DropInnerChecksum},
		{
			name:       "IPv4 destination not local",
			payload:    tcp4(t, client4, netip.MustParseAddr("198.18.0.102"), 40000, 80, true, false, 1, nil),
			src:        lbAddr4,
			checkLocal: true,
			want:       DropNotLocal,
		},
		{
			name:       "IPv6 destination not local",
			payload:    tcp6(t, client6, netip.MustParseAddr("2001:2::102"), 40000, 80, true, false, 1, nil),
			src:        lbAddr6,
			checkLocal: true,
			want:       DropNotLocal,
		},
		// Not expected over GUE (a plain UDP socket gets no GRO), but the
		// inner checks are IPIP's, repair included.
		{name: "partial TCP checksum", payload: partial(t, data4), src: lbAddr4, want: pass, inner: data4, completed: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFilter(tc.allowed, tc.checkLocal, vip4, vip6)
			got, _ := f.stripGUE(bytes.Clone(tc.payload), tc.src)
			checkOne(t, f, tc.want)
			if c := f.stats.completed.Load(); c != tc.completed {
				t.Errorf("completed = %d, want %d", c, tc.completed)
			}
			if tc.want != pass {
				if got != nil {
					t.Errorf("stripGUE passed %d bytes, want a drop (%v)", len(got), tc.want)
				}
				return
			}
			want := tc.inner
			if want == nil {
				want = tc.payload
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("inner packet:\n got %x\nwant %x", got, want)
			}
			if !checksumsOK(t, got) {
				t.Errorf("gopacket: inner checksums wrong")
			}
		})
	}
}

// FuzzStripGUE checks, for any payload from either family, that stripGUE
// does not panic, counts exactly one reason for a drop, and passes only an
// IP packet of the outer family whose length fields cover the payload
// exactly.
func FuzzStripGUE(f *testing.F) {
	f.Add(guePayload(f, gue4(f, lbAddr4, beAddr4, 50000, DefaultGUEPort, tcp4(f, client4, vip4, 1, 80, true, false, 1, nil))), false)
	f.Add(guePayload(f, gue6(f, lbAddr6, beAddr6, 50000, DefaultGUEPort, tcp6(f, client6, vip6, 1, 80, true, false, 1, nil))), true)
	f.Add([]byte{0x00, 0x04, 0x00, 0x00}, false)
	f.Add(hinted(prevOwner4, 0, tcp4(f, client4, vip4, 1, 80, false, true, 1, nil)), false)
	f.Add(hinted(prevOwner6, 1, tcp6(f, client6, vip6, 1, 80, false, true, 1, nil)), true)
	f.Fuzz(func(t *testing.T, payload []byte, six bool) {
		flt := newFilter(nil, false)
		src := lbAddr4
		if six {
			src = lbAddr6
		}
		got, h := flt.stripGUE(bytes.Clone(payload), src)
		s := flt.stats.snapshot()
		if got != nil && h.present() && h.prev.Is6() != six {
			t.Fatalf("hint names %v for an inner packet of the other family", h.prev)
		}
		if got == nil {
			if s.TotalDropped() != 1 {
				t.Fatalf("dropped without exactly one reason: %+v", s)
			}
			return
		}
		if s.TotalDropped() != 0 {
			t.Fatalf("passed and counted a drop: %+v", s)
		}
		switch {
		case !six && len(got) >= packet.IPv4MinSize && got[0]>>4 == 4 && int(binary.BigEndian.Uint16(got[2:])) == len(got):
		case six && len(got) >= packet.IPv6Size && got[0]>>4 == 6 && packet.IPv6Size+int(binary.BigEndian.Uint16(got[4:])) == len(got):
		default:
			t.Fatalf("passed a bad inner packet %x (IPv6 outer: %v)", got, six)
		}
	})
}
