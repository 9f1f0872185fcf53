// Package icmperr builds the ICMP errors a forwarder sends about a packet
// it cannot forward whole: ICMP fragmentation-needed (RFC 792, RFC 1191)
// and ICMPv6 Packet Too Big (RFC 4443), each written in front of the packet
// it quotes, so nothing is copied. NAT and DSR both need them: an egress
// link can be smaller in either mode. It does no I/O and no allocation.
package icmperr
