package quiclb

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
)

// Generator issues connection IDs for one server: the server side of
// QUIC-LB, for backends written in Go. Its method set matches quic-go's
// quic.ConnectionIDGenerator once the []byte is wrapped:
//
//	func (a adapter) GenerateConnectionID() (quic.ConnectionID, error) {
//		b, err := a.g.GenerateConnectionID()
//		return quic.ConnectionIDFromBytes(b), err
//	}
//
// Nonces. The draft forbids reusing a nonce for a server ID under one
// configuration (two equal CIDs would share a stateless reset token and,
// with a key, leak information about it).
//   - With a key, the nonce is a big-endian counter of NonceLen octets that
//     starts at a random value (crypto/rand), as the draft suggests: the
//     encryption hides it, and the CIDs are distinct until the counter has
//     gone all the way round, which the Generator refuses to do (an error
//     after 2^(8*NonceLen) CIDs; only reachable with 4- to 7-octet nonces).
//   - Without a key the nonce is in the clear and must have "no observable
//     relationship" to earlier ones. Random nonces would collide (a 4-octet
//     nonce after about 2^16 CIDs), so the Generator encrypts the same
//     counter with a permutation keyed by a random key of its own, never
//     shared: the draft's four-pass Feistel over NonceLen octets (one AES
//     block when NonceLen is 16). The nonces are distinct and look random.
//
// The low 5 bits of the first octet are random for each CID (crypto/rand):
// the draft lets a server that does not self-encode the CID length use them
// freely, but they must not relate to earlier CIDs of the connection.
//
// Switch starts a new counter (new random start, new permutation key):
// coming back to an earlier configuration could in principle repeat a nonce
// of that configuration's earlier life, with probability about
// issued/2^(8*NonceLen).
//
// A Generator is safe for concurrent use.
type Generator struct {
	mu     sync.Mutex
	codec  *Codec
	sid    [MaxServerIDLen]byte
	nonce  nonceSource
	s      Scratch
	cidLen int
}

// nonceSource is a counter of n octets from a random start, optionally
// passed through a private permutation.
type nonceSource struct {
	n       int
	ctr     [MaxIDNonceLen]byte
	issued  uint64
	limit   uint64 // 0: no practical limit (NonceLen >= 8)
	permute bool
	single  cipher.Block // permutation when n == 16
	f       feistel      // permutation otherwise
}

func newNonceSource(n int, permute bool) (nonceSource, error) {
	ns := nonceSource{n: n, permute: permute}
	if _, err := rand.Read(ns.ctr[:n]); err != nil {
		return ns, fmt.Errorf("quiclb: random nonce start: %w", err)
	}
	if n < 8 {
		ns.limit = 1 << (8 * n)
	}
	if permute {
		var key [KeyLen]byte
		if _, err := rand.Read(key[:]); err != nil {
			return ns, fmt.Errorf("quiclb: random nonce key: %w", err)
		}
		b, err := aes.NewCipher(key[:])
		if err != nil {
			return ns, err
		}
		if n == aes.BlockSize {
			ns.single = b
		} else {
			ns.f = newFeistel(b, n)
		}
	}
	return ns, nil
}

var errNonceSpent = errors.New("quiclb: nonce space of the configuration used up; rotate the configuration")

// next writes the next nonce into dst[:n].
func (ns *nonceSource) next(dst []byte, s *Scratch) error {
	if ns.limit != 0 && ns.issued >= ns.limit {
		return errNonceSpent
	}
	ns.issued++
	ctr := ns.ctr[:ns.n]
	for i := len(ctr) - 1; i >= 0; i-- {
		ctr[i]++
		if ctr[i] != 0 {
			break
		}
	}
	switch {
	case !ns.permute:
		copy(dst, ctr)
	case ns.single != nil:
		ns.single.Encrypt(dst, ctr)
	default:
		ns.f.encrypt(dst, ctr, s)
	}
	return nil
}

// NewGenerator returns a Generator for configuration c and this server's ID
// (ServerIDLen octets).
func NewGenerator(c Config, serverID []byte) (*Generator, error) {
	g := &Generator{}
	if err := g.set(c, serverID); err != nil {
		return nil, err
	}
	g.cidLen = c.CIDLen()
	return g, nil
}

func (g *Generator) set(c Config, serverID []byte) error {
	codec, err := NewCodec(c)
	if err != nil {
		return err
	}
	if len(serverID) != c.ServerIDLen {
		return fmt.Errorf("quiclb: server ID of %d octets for a configuration of %d", len(serverID), c.ServerIDLen)
	}
	ns, err := newNonceSource(c.NonceLen, c.Key == nil)
	if err != nil {
		return err
	}
	g.codec = codec
	copy(g.sid[:], serverID)
	g.nonce = ns
	return nil
}

// GenerateConnectionID returns a fresh CID of ConnectionIDLen() octets.
func (g *Generator) GenerateConnectionID() ([]byte, error) {
	var low [1]byte
	if _, err := rand.Read(low[:]); err != nil {
		return nil, fmt.Errorf("quiclb: random first octet: %w", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.codec
	var nonce [MaxIDNonceLen]byte
	n := nonce[:c.plen-c.sidLen]
	if err := g.nonce.next(n, &g.s); err != nil {
		return nil, err
	}
	cid := make([]byte, c.cidLen)
	if err := c.Encode(cid, g.sid[:c.sidLen], n, low[0], &g.s); err != nil {
		return nil, err
	}
	return cid, nil
}

// ConnectionIDLen is the length of every CID the Generator issues; Switch
// keeps it.
func (g *Generator) ConnectionIDLen() int { return g.cidLen }

// Switch moves the generator to another configuration (config rotation);
// later CIDs use it. The CID length must stay the same (quic-go fixes it per
// transport); on any error the Generator keeps its old configuration.
func (g *Generator) Switch(c Config, serverID []byte) error {
	if c.CIDLen() != g.cidLen {
		return fmt.Errorf("quiclb: switch to CIDs of %d octets from %d: the length must stay", c.CIDLen(), g.cidLen)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	next := Generator{}
	if err := next.set(c, serverID); err != nil {
		return err
	}
	g.codec, g.sid, g.nonce = next.codec, next.sid, next.nonce
	return nil
}
