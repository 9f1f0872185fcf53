// Command vipd-quicbackend is the test bed's QUIC server: a backend
// written in Go on quic-go that issues QUIC-LB connection IDs through
// package quiclb's Generator, as docs/quic-lb.md describes. Each stream
// it accepts gets the server's name and a newline, then its own bytes
// back. It listens on one or more UDP addresses (a NAT backend on its own
// address, a DSR backend on the VIP its decapsulator delivers to).
//
//	vipd-quicbackend -name backend1 -listen :4433,198.18.0.101:443 \
//	    -quiclb 0:2:6:0a01 -quiclb 1:2:6:0b01:/path/key1 -switch-file /path/switch
//
// -quiclb is ROTATION:SERVER_ID_LEN:NONCE_LEN:SERVER_ID_HEX[:KEY_FILE];
// the first one given issues the IDs, and the second takes over when the
// -switch-file appears (a configuration rotation). All backends of a bed
// share the stateless reset key given by -reset-key, as a deployment's
// servers do: a server that gets a packet of another's connection resets
// it at once, so a misrouted connection dies visibly instead of timing
// out.
package main
