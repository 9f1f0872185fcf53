// Package csumref is the Internet checksum written the slow, obvious way
// (RFC 1071: 16-bit big-endian words, end-around carry), for tests to check
// what the packet package's fast code and the pipeline produce without
// letting that code vouch for itself. Only tests import it.
package csumref

import "net"

// Sum returns the folded ones' complement sum of b added to init: 0xffff
// for data whose checksum field is right.
func Sum(b []byte, init uint32) uint32 {
	s := init
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return s
}

// Pseudo returns the sum of the pseudo-header of an upper-layer packet of n
// bytes and protocol proto between src and dst: IPv4 (RFC 793) when both
// are 4 bytes long, else IPv6 (RFC 8200 §8.1).
func Pseudo(src, dst net.IP, proto uint8, n int) uint32 {
	if s4, d4 := src.To4(), dst.To4(); len(src) == net.IPv4len && s4 != nil && d4 != nil {
		b := append(append([]byte{}, s4...), d4...)
		return Sum(append(b, 0, proto, byte(n>>8), byte(n)), 0)
	}
	b := append(append([]byte{}, src.To16()...), dst.To16()...)
	return Sum(append(b, byte(n>>24), byte(n>>16), byte(n>>8), byte(n), 0, 0, 0, proto), 0)
}
