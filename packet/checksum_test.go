package packet

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"testing"
)

func TestSumMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	fill := func(n int, v byte) []byte { return bytes.Repeat([]byte{v}, n) }
	cases := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"one byte", []byte{0xab}},
		{"two bytes", []byte{0xab, 0xcd}},
		{"all zero 64", fill(64, 0)},
		{"all ones 64", fill(64, 0xff)},
		{"all ones odd 63", fill(63, 0xff)},
		{"carry chain 1500", fill(1500, 0xfe)},
		// RFC 1071 §3 example: 00 01 f2 03 f4 f5 f6 f7 sums to 0xddf2.
		{"RFC 1071 example", []byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}},
	}
	for n := 0; n < 200; n++ {
		b := make([]byte, rng.IntN(2000))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		cases = append(cases, struct {
			name string
			b    []byte
		}{"random", b})
	}
	for _, c := range cases {
		for _, initial := range []uint16{0, 1, 0x8000, 0xfffe, 0xffff} {
			got := Sum(c.b, initial)
			want := refSum(c.b, uint32(initial))
			// 0x0000 and 0xFFFF are both ones' complement zero; Sum must
			// still agree with the reference on which one it returns,
			// because a checksum field must be one exact value.
			if got != want {
				t.Errorf("%s (len %d, initial %#04x): Sum = %#04x, reference %#04x",
					c.name, len(c.b), initial, got, want)
			}
			if Checksum(c.b, initial) != ^want {
				t.Errorf("%s: Checksum is not ^Sum", c.name)
			}
		}
	}
	if got := Sum(cases[7].b, 0); got != 0xddf2 {
		t.Errorf("RFC 1071 example: Sum = %#04x, want 0xddf2", got)
	}
}

func TestSumSplit(t *testing.T) {
	// Summing an even-length prefix, then the rest from it, equals summing
	// the whole: how pseudo-headers and split headers are chained.
	rng := rand.New(rand.NewPCG(3, 4))
	for n := 0; n < 500; n++ {
		b := make([]byte, 1+rng.IntN(300))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		cut := rng.IntN(len(b)/2+1) * 2
		if got, want := Sum(b[cut:], Sum(b[:cut], 0)), Sum(b, 0); got != want {
			t.Fatalf("len %d cut %d: chained %#04x, whole %#04x", len(b), cut, got, want)
		}
	}
}

func TestPseudoHeaderSums(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for n := 0; n < 1000; n++ {
		var s4, d4 [4]byte
		var s6, d6 [16]byte
		binary.BigEndian.PutUint32(s4[:], rng.Uint32())
		binary.BigEndian.PutUint32(d4[:], rng.Uint32())
		binary.BigEndian.PutUint64(s6[:], rng.Uint64())
		binary.BigEndian.PutUint64(s6[8:], rng.Uint64())
		binary.BigEndian.PutUint64(d6[:], rng.Uint64())
		binary.BigEndian.PutUint64(d6[8:], rng.Uint64())
		proto := uint8(rng.Uint32())
		l16 := uint16(rng.Uint32())
		l32 := rng.Uint32()
		if got, want := PseudoHeaderSum4(s4, d4, proto, l16),
			refSum(nil, refPseudo(net.IP(s4[:]), net.IP(d4[:]), proto, int(l16))); got != want {
			t.Fatalf("PseudoHeaderSum4 = %#04x, reference %#04x", got, want)
		}
		want := refSum(nil, refPseudo(net.IP(s6[:]), net.IP(d6[:]), proto, 0)+
			l32>>16+l32&0xffff)
		if got := PseudoHeaderSum6(&s6, &d6, proto, l32); got != want {
			t.Fatalf("PseudoHeaderSum6 = %#04x, reference %#04x", got, want)
		}
	}
}

// fullChecksum recomputes a checksum field at off in b from scratch with the
// reference sum.
func fullChecksum(b []byte, off int, initial uint32) uint16 {
	c := append([]byte(nil), b...)
	c[off], c[off+1] = 0, 0
	return ^refSum(c, initial)
}

func TestChecksumUpdateEqualsRecompute(t *testing.T) {
	// Random 40-byte "headers" with a checksum at offset 10; change a
	// 16-, 32- or 128-bit aligned field and compare the incremental result
	// with a recomputation. Field values are drawn to hit 0x0000 and 0xFFFF
	// often, the corner cases of RFC 1624.
	rng := rand.New(rand.NewPCG(7, 8))
	word := func() uint16 {
		switch rng.IntN(4) {
		case 0:
			return 0
		case 1:
			return 0xffff
		}
		return uint16(rng.Uint32())
	}
	for n := 0; n < 20000; n++ {
		b := make([]byte, 40)
		for i := 0; i < len(b); i += 2 {
			binary.BigEndian.PutUint16(b[i:], word())
		}
		const csumOff = 10
		binary.BigEndian.PutUint16(b[csumOff:], fullChecksum(b, csumOff, 0))
		old := binary.BigEndian.Uint16(b[csumOff:])
		var got uint16
		switch kind := rng.IntN(3); kind {
		case 0:
			off := 2 * rng.IntN(5) // 0..8, before the checksum
			o := binary.BigEndian.Uint16(b[off:])
			v := word()
			binary.BigEndian.PutUint16(b[off:], v)
			got = ChecksumUpdate16(old, o, v)
		case 1:
			off := 12 + 4*rng.IntN(6)
			o := binary.BigEndian.Uint32(b[off:])
			v := uint32(word())<<16 | uint32(word())
			binary.BigEndian.PutUint32(b[off:], v)
			got = ChecksumUpdate32(old, o, v)
		case 2:
			off := 12 + 2*rng.IntN(7)
			o := [16]byte(b[off : off+16])
			var v [16]byte
			for i := 0; i < 16; i += 2 {
				binary.BigEndian.PutUint16(v[i:], word())
			}
			copy(b[off:], v[:])
			got = ChecksumUpdate128(old, &o, &v)
		}
		if want := fullChecksum(b, csumOff, 0); got != want {
			t.Fatalf("case %d: incremental %#04x, recomputed %#04x\n% x", n, got, want, b)
		}
	}
}

func TestChecksumUpdateRFC1624Corner(t *testing.T) {
	// RFC 1624 §4: a header whose other words sum to 0xCD7A (checksum
	// 0x3285) has a word change from 0x5555 to 0x3285. Then the new sum
	// is 0xFFFF, so the correct checksum is 0x0000. Eqn. 2 of RFC 1624
	// would give 0xFFFF.
	b := make([]byte, 6)
	binary.BigEndian.PutUint16(b[0:], 0xcd7a)
	binary.BigEndian.PutUint16(b[2:], 0x5555)
	c := fullChecksum(b, 4, 0)
	binary.BigEndian.PutUint16(b[4:], c)
	got := ChecksumUpdate16(c, 0x5555, 0x3285)
	binary.BigEndian.PutUint16(b[2:], 0x3285)
	if want := fullChecksum(b, 4, 0); got != want || want != 0 {
		t.Fatalf("ChecksumUpdate16 = %#04x, recomputed %#04x, want 0x0000", got, want)
	}
	// The same through the 32-bit and 128-bit paths.
	if got := ChecksumUpdate32(c, 0xcd7a5555, 0xcd7a3285); got != 0 {
		t.Errorf("ChecksumUpdate32 = %#04x, want 0x0000", got)
	}
	var o, n [16]byte
	binary.BigEndian.PutUint32(o[12:], 0xcd7a5555)
	binary.BigEndian.PutUint32(n[12:], 0xcd7a3285)
	if got := ChecksumUpdate128(c, &o, &n); got != 0 {
		t.Errorf("ChecksumUpdate128 = %#04x, want 0x0000", got)
	}
	// No change leaves the checksum alone, for any checksum but the
	// all-zero-header case.
	for _, c := range []uint16{0, 1, 0x1234, 0xfffe} {
		if got := ChecksumUpdate16(c, 0x4242, 0x4242); got != c {
			t.Errorf("no-op update of %#04x gave %#04x", c, got)
		}
	}
}

// FuzzSum holds the fast Sum to the reference on arbitrary bytes.
func FuzzSum(f *testing.F) {
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, uint16(0xffff))
	f.Add([]byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}, uint16(0))
	f.Fuzz(func(t *testing.T, b []byte, initial uint16) {
		if got, want := Sum(b, initial), refSum(b, uint32(initial)); got != want {
			t.Fatalf("Sum = %#04x, reference %#04x", got, want)
		}
	})
}

// TestChecksumUpdate48 checks the combined update against two single ones
// and against recomputation, over random changes.
func TestChecksumUpdate48(t *testing.T) {
	r := rand.New(rand.NewPCG(48, 48))
	for i := 0; i < 20000; i++ {
		b := make([]byte, 20)
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		csum := Checksum(b, 0)
		o32 := binary.BigEndian.Uint32(b[4:8])
		o16 := binary.BigEndian.Uint16(b[12:14])
		n32, n16 := r.Uint32(), uint16(r.Uint32())
		binary.BigEndian.PutUint32(b[4:8], n32)
		binary.BigEndian.PutUint16(b[12:14], n16)
		want := Checksum(b, 0)
		if got := ChecksumUpdate48(csum, o32, n32, o16, n16); got != want {
			t.Fatalf("ChecksumUpdate48 = %#04x, recomputed %#04x", got, want)
		}
		if two := ChecksumUpdate16(ChecksumUpdate32(csum, o32, n32), o16, n16); two != want {
			t.Fatalf("two updates %#04x, recomputed %#04x", two, want)
		}
	}
}

// TestIPv4ChecksumFastPath checks the loop-free header check against Sum,
// on random headers with and without a correct checksum.
func TestIPv4ChecksumFastPath(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 20))
	for i := 0; i < 50000; i++ {
		h := make([]byte, 20)
		for j := range h {
			h[j] = byte(r.Uint32())
		}
		h[0] = 0x45
		if i%2 == 0 {
			binary.BigEndian.PutUint16(h[10:], 0)
			binary.BigEndian.PutUint16(h[10:], Checksum(h, 0))
		}
		if i%4 == 2 && binary.BigEndian.Uint16(h[10:]) == 0 {
			h[10], h[11] = 0xff, 0xff // the other zero of ones' complement
		}
		want := Sum(h, 0) == 0xffff
		if got := IPv4(h).IsChecksumValid(); got != want {
			t.Fatalf("IsChecksumValid = %v, Sum says %v for % x", got, want, h)
		}
		if got := ChecksumValid20((*[IPv4MinSize]byte)(h)); got != want {
			t.Fatalf("ChecksumValid20 = %v, Sum says %v for % x", got, want, h)
		}
		if i%2 == 0 && !want {
			t.Fatalf("a computed checksum does not verify: % x", h)
		}
	}
	// Edges of the divisibility test: the all-zero header (sum 0, a
	// multiple of 0xffff that is no valid sum), all-ones (valid), and a
	// header whose words cancel but for a checksum of +0 or -0.
	edges := [][]byte{make([]byte, 20), bytes.Repeat([]byte{0xff}, 20)}
	z := make([]byte, 20)
	z[0], z[1] = 0xff, 0xff
	edges = append(edges, z) // 0xffff + zeros: valid (checksum field 0)
	z2 := append([]byte(nil), z...)
	z2[10], z2[11] = 0xff, 0xff // and with -0 in the field: still valid
	edges = append(edges, z2)
	for _, h := range edges {
		want := Sum(h, 0) == 0xffff
		if got := ChecksumValid20((*[IPv4MinSize]byte)(h)); got != want {
			t.Fatalf("ChecksumValid20 = %v, Sum says %v for % x", got, want, h)
		}
	}
}

// TestIPv4ComputeChecksumFastPath checks the loop-free computation against
// the generic one on random option-less headers.
func TestIPv4ComputeChecksumFastPath(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 21))
	for i := 0; i < 50000; i++ {
		h := make([]byte, 20)
		for j := range h {
			h[j] = byte(r.Uint32())
		}
		h[0] = 0x45
		want := Checksum(h[12:20], Sum(h[:10], 0))
		if got := IPv4(h).ComputeChecksum(); got != want {
			t.Fatalf("ComputeChecksum = %#04x, generic %#04x for % x", got, want, h)
		}
	}
}
