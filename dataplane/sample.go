package dataplane

import (
	"encoding/binary"

	"github.com/vipd/vipd/packet"
)

// NAT forwards like a router: it updates transport checksums and never
// verifies them, so a corrupt segment stays corrupt and the receiver drops
// it. One sender makes corrupt segments by the million without knowing:
// a container or VM on the same host whose veth or tap has TX checksum
// offload on hands the kernel frames with a partial checksum, a state that
// AF_XDP and AF_PACKET do not carry; vipd then forwards segments whose
// checksum was never finished, and the connections hang. vipd verifies the
// transport checksum of one NAT'ed packet in l4SampleEvery (before its
// rewrite, so the count says what arrived) and counts the failures, so the
// cause shows in the metrics (vipd_l4_checksum_sampled_total and
// vipd_l4_checksum_bad_total); docs/operations.md, "Host preparation", says what to do.
const l4SampleEvery = 64 // a power of two

// sampleL4 verifies the transport checksum of every l4SampleEvery-th
// TCP or UDP packet it sees. Fragments are skipped (their checksum covers
// bytes that are not here), and so is UDP over IPv4 without a checksum.
func (w *Worker) sampleL4(frame []byte, f *packet.Frame) {
	if w.l4Tick++; w.l4Tick&(l4SampleEvery-1) == 0 {
		w.verifyL4(frame, f)
	}
}

// verifyL4 is sampleL4's check of one packet.
func (w *Worker) verifyL4(frame []byte, f *packet.Frame) {
	if f.Frag || !f.HasL4 || (f.Proto != packet.ProtoTCP && f.Proto != packet.ProtoUDP) {
		return
	}
	l4 := frame[f.L4Off : f.L3Off+f.L3Len]
	var pseudo uint16
	if f.EtherType == packet.EtherTypeIPv4 {
		if f.Proto == packet.ProtoUDP && binary.BigEndian.Uint16(l4[6:]) == 0 {
			return
		}
		ip := f.IPv4(frame)
		pseudo = packet.PseudoHeaderSum4(ip.SourceAddress(), ip.DestinationAddress(), f.Proto, uint16(len(l4)))
	} else {
		ip := f.IPv6(frame)
		pseudo = packet.PseudoHeaderSum6(ip.SourceAddress(), ip.DestinationAddress(), f.Proto, uint32(len(l4)))
	}
	w.c.L4ChecksumSampled++
	if packet.Sum(l4, pseudo) != 0xffff {
		w.c.L4ChecksumBad++
	}
}
