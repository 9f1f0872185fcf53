// Package quiclb implements the connection ID encoding of QUIC-LB
// (draft-ietf-quic-load-balancers-21, "QUIC-LB: Generating Routable QUIC
// Connection IDs"): servers behind a load balancer put their server ID into
// the connection IDs they issue, so that the load balancer can route a
// connection's packets to the same server after the client's address or port
// changes (migration, NAT rebinding), without keeping per-connection state.
//
// # Connection IDs
//
// A QUIC-LB CID is a first octet, then the server ID, then a nonce:
//
//	first octet: config rotation (3 bits) | length or random bits (5 bits)
//	then:        server ID (ServerIDLen >= 1) || nonce (NonceLen >= 4),
//	             ServerIDLen + NonceLen <= 19
//
// The rotation bits name one of up to seven configurations (codepoints 0..6)
// so that a configuration can be replaced while CIDs of the old one are still
// in use. The forms (see Form):
//
//   - Plaintext: no key; the server ID is in the clear.
//   - SinglePass: with a 16-octet AES-128 key, when server ID and nonce
//     fill exactly 16 octets: one AES-128-ECB block.
//   - FourPass / ThreePass: with a key, any other length: a four-round
//     Feistel network with AES-128-ECB as its round function. The server
//     always encrypts in four passes; the load balancer stops after three
//     when the nonce is at least as long as the server ID (ThreePass).
//
// # Unroutable CIDs
//
// Decoder.Route follows the QUIC invariants (RFC 8999) to the destination
// CID and classifies it. A DCID is not routed by its server ID when: it is
// client-chosen (QUIC v1 and v2 Initial and 0-RTT packets); its rotation
// bits are 0b111 (a server without a configuration asks for 4-tuple
// routing); no configuration sits at its codepoint; or it is shorter than
// its configuration's CID. The caller routes those by its fallback (the
// 4-tuple). Version negotiation packets and datagrams too short for a long
// header's own fields are not QUIC. RouteSource decodes the source CID of a
// long header instead, for a server's packet quoted in an ICMP error.
//
// # Cost and concurrency
//
// Codec and Decoder are immutable and shared by all workers. Their decoding
// paths (Codec.ServerID, Decoder.Route, Decoder.RouteSource) never allocate;
// the AES passes work in a Scratch, which each goroutine owns (a worker keeps
// one for its lifetime). The AES key schedule is computed once, in NewCodec,
// with crypto/aes (hardware AES where the CPU has it).
//
// Generator is the server side: it issues CIDs for one server ID with
// non-repeating nonces, in the shape of quic-go's ConnectionIDGenerator.
//
// # Keys
//
// Keys are never printed: Config.String, Codec.Config and every error of
// this package leave the key out (Codec does not even keep it, only the AES
// key schedule).
package quiclb
