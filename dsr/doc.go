// Package dsr holds DSR's encapsulations, the counterpart of package nat:
// nat rewrites a packet, dsr wraps it for direct server return: IPv4 in
// IPv4 (RFC 2003), IPv6 in IPv6 (RFC 2473), and either in GUE over UDP
// (variant 1, the IP packet directly after the UDP header, as Katran and
// Linux's fou with gue do), the outer headers written into the headroom in
// front of the untouched inner packet, so nothing is copied. GUE's UDP
// source port (SourcePort) and, for IP in IP, a per-flow outer source
// address give a backend's NIC something to spread flows over its receive
// queues by. A packet that carries a previous-owner hint (GUEHint4,
// GUEHint6; see hint.go for the layout) goes in GUE variant 0 with the
// hint as private data. It does no I/O and no allocation.
package dsr
