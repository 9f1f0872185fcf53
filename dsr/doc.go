// Package dsr implements the parts of forwarding that add or answer bytes
// rather than rewrite them: IPIP encapsulation for direct server return
// (IPv4 in IPv4, RFC 2003; IPv6 in IPv6, RFC 2473), ICMP
// fragmentation-needed (RFC 792/1191) and ICMPv6 Packet Too Big (RFC 4443)
// messages built in front of the packet they quote, and IPv4 fragmentation
// (RFC 791) of packets whose DF bit is clear. NAT mode uses the last two as
// well: an egress link can be smaller in either mode. It does no I/O.
package dsr
