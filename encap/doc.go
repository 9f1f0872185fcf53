// Package encap wraps packets for direct server return: IPv4 in IPv4 (RFC
// 2003) and IPv6 in IPv6 (RFC 2473), the outer header written into the
// headroom in front of the untouched inner packet, so nothing is copied.
// It does no I/O and no allocation.
package encap
