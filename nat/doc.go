// Package nat rewrites packets for NAT mode: destination NAT of client
// packets to the chosen backend and the reverse rewrite of backend replies
// back to the VIP, with incremental (RFC 1624) checksum updates. It does no
// I/O.
package nat
