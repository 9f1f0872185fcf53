package quiclb

import (
	"errors"
	"fmt"
)

const (
	NumConfigs     = 7  // config rotation codepoints 0..6
	Unroutable     = 7  // codepoint 0b111: the server asks for 4-tuple routing
	KeyLen         = 16 // AES-128
	MinServerIDLen = 1
	MinNonceLen    = 4
	MaxIDNonceLen  = 19 // server ID + nonce octets; the CID has one more (the first octet)
	MaxServerIDLen = MaxIDNonceLen - MinNonceLen
	MaxCIDLen      = 20
)

// Config is one QUIC-LB configuration: the parameters a configuration agent
// hands to both the load balancer and the servers. Lengths are in octets.
type Config struct {
	Rotation    uint8  // codepoint 0..6
	ServerIDLen int    // octets
	NonceLen    int    // octets
	Key         []byte // nil: plaintext; else exactly KeyLen octets
}

// Validate checks the draft's bounds. Its errors name fields and lengths,
// never key bytes.
func (c Config) Validate() error {
	switch {
	case c.Rotation >= NumConfigs:
		return fmt.Errorf("quiclb: config rotation %d: want 0..%d (%d is reserved for unroutable CIDs)",
			c.Rotation, NumConfigs-1, Unroutable)
	case c.ServerIDLen < MinServerIDLen:
		return fmt.Errorf("quiclb: server ID length %d: want at least %d", c.ServerIDLen, MinServerIDLen)
	case c.NonceLen < MinNonceLen:
		return fmt.Errorf("quiclb: nonce length %d: want at least %d", c.NonceLen, MinNonceLen)
	case c.ServerIDLen+c.NonceLen > MaxIDNonceLen:
		return fmt.Errorf("quiclb: server ID length %d + nonce length %d = %d: want at most %d",
			c.ServerIDLen, c.NonceLen, c.ServerIDLen+c.NonceLen, MaxIDNonceLen)
	case c.Key != nil && len(c.Key) != KeyLen:
		return fmt.Errorf("quiclb: key length %d: want %d or no key", len(c.Key), KeyLen)
	}
	return nil
}

// CIDLen is the length of the connection IDs this configuration produces.
func (c Config) CIDLen() int { return 1 + c.ServerIDLen + c.NonceLen }

// String describes the configuration without its key.
func (c Config) String() string {
	return fmtConfig(c.Rotation, c.ServerIDLen, c.NonceLen, c.Form())
}

// GoString keeps %#v from printing the key, like String.
func (c Config) GoString() string { return "quiclb.Config{" + c.String() + "}" }

func fmtConfig(rot uint8, sidLen, nonceLen int, f Form) string {
	return fmt.Sprintf("rotation %d: server ID %d, nonce %d, %s", rot, sidLen, nonceLen, f)
}

// Form is the encoding a configuration uses, named by what it costs the load
// balancer to decode.
type Form uint8

const (
	Plaintext  Form = iota // no key: the server ID is in the clear
	SinglePass             // key, server ID + nonce == 16 octets: one AES-128-ECB block
	FourPass               // key, other lengths, server ID longer than the nonce: 4 AES passes to decode
	ThreePass              // key, other lengths, nonce >= server ID: encoded in 4 passes, decoded in 3
)

func (f Form) String() string {
	switch f {
	case Plaintext:
		return "plaintext"
	case SinglePass:
		return "single-pass"
	case FourPass:
		return "four-pass"
	case ThreePass:
		return "three-pass"
	}
	return fmt.Sprintf("Form(%d)", uint8(f))
}

// Form reports the encoding c uses. Meaningful only for a valid c.
func (c Config) Form() Form {
	switch {
	case c.Key == nil:
		return Plaintext
	case c.ServerIDLen+c.NonceLen == 16:
		return SinglePass
	case c.NonceLen >= c.ServerIDLen:
		// The server ID lies wholly in left_0 (for an odd length, left_0's
		// last octet holds only half a nibble of data, but then
		// ServerIDLen <= NonceLen means ServerIDLen < half): the decoder
		// stops after passes 4, 3, 2.
		return ThreePass
	}
	return FourPass
}

var (
	errSIDLen   = errors.New("quiclb: server ID of the wrong length for the configuration")
	errNonceLen = errors.New("quiclb: nonce of the wrong length for the configuration")
	errDstLen   = errors.New("quiclb: destination shorter than the configuration's CID")
)
