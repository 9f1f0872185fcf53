// Package packet provides zero-copy views over wire-format headers:
// Ethernet (with one 802.1Q tag), IPv4 (RFC 791), IPv6 (RFC 8200) with its
// extension headers, TCP (RFC 9293), UDP (RFC 768), ICMPv4 (RFC 792) and
// ICMPv6 (RFC 4443), plus full and incremental (RFC 1624) Internet checksums.
//
// A view is a named []byte. Its IsValid (or the parser that produced it) is
// the single bounds check; accessors trust it. Nothing in this package
// allocates.
//
// The dataplane parses each frame once and then works through views cut
// from the same bytes:
//
//	var f packet.Frame // on the worker's stack, reused for every frame
//	if err := packet.Parse(frame, &f); err != nil {
//		drops[reason(err)]++ // err is one of the Err* sentinels
//		return
//	}
//	if f.EtherType == packet.EtherTypeIPv4 && f.HasL4 && f.Proto == packet.ProtoTCP {
//		ip, tcp := f.IPv4(frame), f.TCP(frame)
//		old := ip.DestinationAddress()
//		ip.SetDestinationAddressWithChecksumUpdate(backend)
//		tcp.UpdatePseudoHeaderAddress4(old, backend)
//	}
//
// Parse checks structure, not checksums: a forwarder verifies the IPv4
// header checksum itself (IPv4.IsChecksumValid, RFC 1812 §5.2.2), and the
// incremental updates keep a correct checksum correct and a wrong one wrong.
//
// Views are not safe for concurrent use when any goroutine writes through
// them; a frame belongs to one worker at a time.
package packet
