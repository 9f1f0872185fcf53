// Package quicflow is the test bed's QUIC client kit: long-lived QUIC
// connections (quic-go) from the client namespace through a VIP, each
// streaming both ways with every byte checked, that change their address
// on demand, the two ways a real client does: voluntary migration to a
// new socket (Migrate: a new path, probed, then used) and NAT rebinding
// (Rebind: the socket changes under the connection, which does not know,
// as when a NAT drops its mapping). It is the QUIC twin of
// testbed.EchoFlows, and like it imported only by tests, so that nothing
// else links quic-go.
package quicflow
