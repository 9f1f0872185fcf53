// Package dsr implements direct server return: IPIP encapsulation (IPv4 in
// IPv4, RFC 2003; IPv6 in IPv6, RFC 2473), egress-MTU checks, generation of
// ICMP fragmentation-needed (RFC 792/1191) and ICMPv6 Packet Too Big
// (RFC 4443) replies, and steering of ICMP errors to the backend that owns a
// flow. It does no I/O.
package dsr
