// Package packet provides zero-copy views over wire-format headers:
// Ethernet (with one 802.1Q tag), ARP, IPv4 (RFC 791), IPv6 (RFC 8200) with its
// extension headers, TCP (RFC 9293), UDP (RFC 768), ICMPv4 (RFC 792) and
// ICMPv6 (RFC 4443), plus full and incremental (RFC 1624) Internet checksums.
//
// A view is a named []byte. Its IsValid (or the parser that produced it) is
// the single bounds check; accessors trust it. Nothing in this package
// allocates.
package packet
