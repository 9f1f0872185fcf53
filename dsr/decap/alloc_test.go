package decap

import (
	"bytes"
	"net/netip"
	"testing"
)

// TestStripDoesNotAllocate holds the per-packet claim for the checks, the
// allow-list, the local-address lookup and the checksum completion; the
// I/O half is TestReceiveDoesNotAllocate (privileged).
func TestStripDoesNotAllocate(t *testing.T) {
	f := newFilter([]netip.Prefix{netip.MustParsePrefix("198.18.1.0/28"), netip.MustParsePrefix("2001:2:0:1::/124")}, true, vip4, vip6)
	big := bytes.Repeat([]byte("y"), 1400)
	pkt4 := ipip(t, lbAddr4, beAddr4, partial(t, tcp4(t, client4, vip4, 40000, 80, false, true, 1, big)))
	pkt6 := partial(t, tcp6(t, client6, vip6, 40000, 80, false, true, 1, big))
	pktG := partial(t, tcp4(t, client4, vip4, 40000, 80, false, true, 1, big)) // a GUE payload
	buf4, buf6, bufG := bytes.Clone(pkt4), bytes.Clone(pkt6), bytes.Clone(pktG)
	allocs := testing.AllocsPerRun(100, func() {
		copy(buf4, pkt4)
		copy(buf6, pkt6)
		copy(bufG, pktG)
		if f.strip4(buf4) == nil || f.strip6(buf6, lbAddr6) == nil || gue(f.stripGUE(bufG, lbAddr4)) == nil {
			t.Fatal("dropped")
		}
	})
	if allocs != 0 {
		t.Errorf("strip4+strip6+stripGUE allocate %v times per packet triple", allocs)
	}
}

func BenchmarkStrip4(b *testing.B) {
	f := newFilter([]netip.Prefix{netip.MustParsePrefix("198.18.1.0/28")}, true, vip4)
	pkt := ipip(b, lbAddr4, beAddr4, tcp4(b, client4, vip4, 40000, 80, false, true, 1, bytes.Repeat([]byte("y"), 1400)))
	b.ReportAllocs()
	b.SetBytes(int64(len(pkt)))
	for b.Loop() {
		if f.strip4(pkt) == nil {
			b.Fatal("dropped")
		}
	}
}

func BenchmarkStripGUE(b *testing.B) {
	f := newFilter([]netip.Prefix{netip.MustParsePrefix("198.18.1.0/28")}, true, vip4)
	pkt := tcp4(b, client4, vip4, 40000, 80, false, true, 1, bytes.Repeat([]byte("y"), 1400)) // the UDP payload
	b.ReportAllocs()
	b.SetBytes(int64(len(pkt)))
	for b.Loop() {
		if inner, _ := f.stripGUE(pkt, lbAddr4); inner == nil {
			b.Fatal("dropped")
		}
	}
}

// FuzzStrip4 checks, for any input, that strip4 does not panic and that
// what it passes is an IPv4 packet of exactly the length its header says,
// lying inside the input.
func FuzzStrip4(f *testing.F) {
	f.Add(ipip(f, lbAddr4, beAddr4, tcp4(f, client4, vip4, 1, 80, true, false, 1, nil)))
	f.Add(ipip(f, lbAddr4, beAddr4, udpTo(f, client4, vip4, []byte("hello"))))
	f.Add(ipip(f, lbAddr4, beAddr4, partial(f, tcp4(f, client4, vip4, 1, 80, false, true, 1, []byte("data")))))
	f.Fuzz(func(t *testing.T, pkt []byte) {
		flt := newFilter(nil, false)
		in := bytes.Clone(pkt)
		got := flt.strip4(in)
		s := flt.stats.snapshot()
		if got == nil {
			if s.TotalDropped() != 1 {
				t.Fatalf("dropped without exactly one reason: %+v", s)
			}
			return
		}
		if s.TotalDropped() != 0 {
			t.Fatalf("passed and counted a drop: %+v", s)
		}
		if len(got) < 20 || got[0]>>4 != 4 || int(got[2])<<8|int(got[3]) != len(got) {
			t.Fatalf("passed a bad inner packet %x", got)
		}
		if !inside(in, got) {
			t.Fatalf("inner packet not inside the input")
		}
	})
}

// inside reports whether sub is a subslice of b.
func inside(b, sub []byte) bool {
	for i := range b {
		if &b[i] == &sub[0] {
			return i+len(sub) <= len(b)
		}
	}
	return false
}

// gue drops stripGUE's hint.
func gue(inner []byte, _ hint) []byte { return inner }
