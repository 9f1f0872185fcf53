// Package ipfrag splits an IPv4 packet whose DF bit is clear into
// fragments that fit an MTU (RFC 791 §3.2, RFC 815), writing each fragment
// into a buffer the caller provides. IPv6 packets are never fragmented on
// the way (RFC 8200 §5), so there is no IPv6 counterpart. It does no I/O
// and no allocation.
package ipfrag
