package ipfrag

import (
	"encoding/binary"

	"github.com/vipd/vipd/packet"
)

// Fragmenter splits an IPv4 datagram whose DF bit is clear into fragments
// of at most a given total length (RFC 791 §3.2, "fragmentation"), so that a
// packet too big for the tunnel or the egress link is delivered rather than
// lost. It keeps its own copy of the original header, so fragment 0 may be
// written over the original packet in place — after every other fragment,
// whose data it would otherwise overwrite. It does not allocate.
type Fragmenter struct {
	src      []byte   // the original datagram: header and data
	hdr      [60]byte // the original header
	hl       int      // original header length
	hlN      [60]byte // header of non-first fragments: options with the copy bit only
	hlNLen   int
	data     int  // bytes of data in the original datagram
	first    int  // data bytes in fragment 0 (a multiple of 8)
	rest     int  // data bytes in each later fragment (a multiple of 8)
	count    int  // number of fragments
	origOff  int  // original fragment offset in bytes (the datagram may be a fragment already)
	origMF   bool // original MF flag, kept by the last fragment
	maxTotal int  // the limit Init was given
}

// Init prepares the split of pkt (a validated IPv4 packet whose DF bit is
// clear) into fragments of at most maxTotal bytes each. It returns the number
// of fragments, or 0 when maxTotal leaves no room for 8 bytes of data after
// the header, or when pkt is a fragment whose data would end past 65,535
// bytes, where its later pieces' offsets would wrap (the caller must then
// drop the packet). A fragment that ends short of that but past 65,515
// bytes, which with a 20-byte header no reassembly accepts either, is
// split as it came: vipd passes on what a router would.
func (f *Fragmenter) Init(pkt packet.IPv4, maxTotal int) int {
	f.src = pkt
	f.hl = pkt.HeaderLength()
	copy(f.hdr[:], pkt[:f.hl])
	f.data = len(pkt) - f.hl
	f.origOff = int(pkt.FragmentOffset())
	if f.origOff+f.data > maxDatagramData {
		f.count = 0
		return 0
	}
	f.origMF = pkt.MF()
	f.maxTotal = maxTotal
	f.hlNLen = copiedOptions(f.hlN[:], f.hdr[:f.hl])
	f.first = (maxTotal - f.hl) &^ 7
	f.rest = (maxTotal - f.hlNLen) &^ 7
	if f.first < 8 || f.rest < 8 {
		f.count = 0
		return 0
	}
	if f.data <= f.first {
		f.count = 1
		return 1
	}
	f.count = 1 + (f.data-f.first+f.rest-1)/f.rest
	return f.count
}

// maxDatagramData bounds a datagram's data: its total length is a 16-bit
// field, and the offset counts data bytes only.
const maxDatagramData = 65535

// Len returns the total length of fragment i.
func (f *Fragmenter) Len(i int) int {
	_, n := f.span(i)
	if i == 0 {
		return f.hl + n
	}
	return f.hlNLen + n
}

// span returns the data offset (relative to the original datagram's data)
// and length of fragment i.
func (f *Fragmenter) span(i int) (int, int) {
	if i == 0 {
		return 0, min(f.first, f.data)
	}
	start := f.first + (i-1)*f.rest
	return start, min(f.rest, f.data-start)
}

// Write writes fragment i (a whole IPv4 packet with a correct header
// checksum) at the start of dst, which must hold Len(i) bytes, and returns
// its length. Fragment 0 may be written to the original packet's own
// storage, once all others are written.
func (f *Fragmenter) Write(i int, dst []byte) int {
	start, n := f.span(i)
	hdr, hl := f.hdr[:f.hl], f.hl
	if i > 0 {
		hdr, hl = f.hlN[:f.hlNLen], f.hlNLen
	}
	// Data first: for fragment 0 in place, src and dst overlap exactly.
	copy(dst[hl:hl+n], f.src[f.hl+start:f.hl+start+n])
	copy(dst[:hl], hdr)
	h := packet.IPv4(dst[:hl+n])
	h[0] = 0x40 | byte(hl/4)
	h.SetTotalLength(uint16(hl + n))
	more := i < f.count-1 || f.origMF
	fo := uint16((f.origOff+start)/8) & 0x1fff
	if more {
		fo |= 0x2000
	}
	binary.BigEndian.PutUint16(h[6:], fo) // DF is clear: fragmenting is only allowed then
	h.SetChecksum(0)
	h.SetChecksum(h.ComputeChecksum())
	return hl + n
}

// copiedOptions writes into dst the header of a non-first fragment: the
// fixed 20 bytes and only the options whose copied flag is set (RFC 791
// §3.1, "option-type"), padded with End-of-List to a 4-byte boundary, and
// returns its length.
func copiedOptions(dst []byte, hdr []byte) int {
	n := copy(dst, hdr[:packet.IPv4MinSize])
	opts := hdr[packet.IPv4MinSize:]
	for i := 0; i < len(opts); {
		t := opts[i]
		if t == 0 { // end of option list
			break
		}
		if t == 1 { // no operation, one byte
			i++
			continue
		}
		if i+1 >= len(opts) || opts[i+1] < 2 || i+int(opts[i+1]) > len(opts) {
			break // malformed: stop copying, the rest is not trusted
		}
		l := int(opts[i+1])
		if t&0x80 != 0 {
			n += copy(dst[n:], opts[i:i+l])
		}
		i += l
	}
	for n%4 != 0 {
		dst[n] = 0
		n++
	}
	return n
}
