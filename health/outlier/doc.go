// Package outlier is passive outlier detection (passive health checks, as
// in Envoy's outlier ejection): it judges backends by what their real
// clients see, next to the active checks. vipd sees a TCP flow's client
// side in NAT and DSR alike, and a client that got the backend's SYN-ACK
// goes on past its SYNs (dataplane.FlowCounters.Handshakes and Answered):
// a backend that resets or ignores new connections — a crashed service
// behind a health endpoint that still answers, a full accept queue, a
// firewall rule — leaves its handshakes unanswered.
//
// A Detector is fed the cumulative counters of every watched backend once
// per tick and decides, per VIP, which backends to eject: those whose
// handshakes in the last Window (each given Timeout to be answered) failed
// at Ratio or more, once at least MinHandshakes were tried. An ejection
// lasts BaseEjection, doubled on every repeat up to MaxEjection; at most
// MaxEjectedPercent of a VIP's watched backends are ejected at once (and
// always one may be). An ejected backend returns when its time is up and
// its active check passes (the caller says which), and its counts start
// afresh. The package does no I/O and keeps no clock: callers pass now.
package outlier
