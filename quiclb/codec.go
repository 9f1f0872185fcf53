package quiclb

import (
	"crypto/aes"
	"crypto/cipher"
	"fmt"
)

// Scratch holds the per-goroutine buffers the AES passes need, so that
// nothing escapes to the heap per call. Its zero value is ready; a worker
// keeps one and never shares it while a call is running.
type Scratch struct {
	in, out [aes.BlockSize]byte // one AES block in and out
	l, r    [aes.BlockSize]byte // Feistel halves (at most 10 octets used)
	p       [aes.BlockSize + 4]byte
}

// feistel is the draft's four-round Feistel network over plen octets
// (5..19 in the draft; the Generator also runs it over a 4..18-octet nonce)
// with AES-128-ECB as the round function.
type feistel struct {
	block cipher.Block
	plen  int // plaintext length in octets
	half  int // plen/2 rounded up; the two halves share an octet when plen is odd
}

func newFeistel(b cipher.Block, plen int) feistel {
	return feistel{block: b, plen: plen, half: (plen + 1) / 2}
}

// round XORs into dst[:half] the first half octets of
// AES(expand(plen, pass, src[:half])).
func (f *feistel) round(dst, src []byte, pass byte, s *Scratch) {
	in := &s.in
	*in = [aes.BlockSize]byte{}
	copy(in[:f.half], src[:f.half])
	in[14] = byte(f.plen)
	in[15] = pass
	f.block.Encrypt(s.out[:], in[:])
	out := s.out[:f.half]
	dst = dst[:f.half]
	for i := range dst {
		dst[i] ^= out[i]
	}
}

// With an odd length, left keeps the high nibble of the middle octet and
// right its low nibble; the masks keep the other nibble zero after each pass.
func (f *feistel) maskLeft(l []byte) {
	if f.plen&1 == 1 {
		l[f.half-1] &= 0xf0
	}
}

func (f *feistel) maskRight(r []byte) {
	if f.plen&1 == 1 {
		r[0] &= 0x0f
	}
}

// split loads src[:plen] into s.l and s.r.
func (f *feistel) split(src []byte, s *Scratch) (l, r []byte) {
	l, r = s.l[:f.half], s.r[:f.half]
	copy(l, src[:f.half])
	copy(r, src[f.plen-f.half:f.plen])
	f.maskLeft(l)
	f.maskRight(r)
	return l, r
}

// join writes l||r (the shared nibble merged when plen is odd) to dst[:plen].
func (f *feistel) join(dst, l, r []byte) {
	if f.plen&1 == 1 {
		copy(dst[:f.half], l)
		dst[f.half-1] |= r[0]
		copy(dst[f.half:f.plen], r[1:])
		return
	}
	copy(dst[:f.half], l)
	copy(dst[f.half:f.plen], r)
}

// encrypt runs the four passes over src[:plen] into dst[:plen]; dst and src
// may overlap exactly.
func (f *feistel) encrypt(dst, src []byte, s *Scratch) {
	l, r := f.split(src, s)
	f.round(r, l, 1, s)
	f.maskRight(r)
	f.round(l, r, 2, s)
	f.maskLeft(l)
	f.round(r, l, 3, s)
	f.maskRight(r)
	f.round(l, r, 4, s)
	f.maskLeft(l)
	f.join(dst, l, r)
}

// decryptLeft runs passes 4, 3, 2 over src[:plen] and returns left_0 (in
// s.l) and right_1 (in s.r).
func (f *feistel) decryptLeft(src []byte, s *Scratch) (l, r []byte) {
	l, r = f.split(src, s)
	f.round(l, r, 4, s)
	f.maskLeft(l)
	f.round(r, l, 3, s)
	f.maskRight(r)
	f.round(l, r, 2, s)
	f.maskLeft(l)
	return l, r
}

// decrypt runs all four passes back: dst[:plen] = plaintext.
func (f *feistel) decrypt(dst, src []byte, s *Scratch) {
	l, r := f.decryptLeft(src, s)
	f.round(r, l, 1, s)
	f.maskRight(r)
	f.join(dst, l, r)
}

// Codec is a prepared configuration: the AES key schedule is computed once,
// in NewCodec, and the key itself is not kept. A Codec is immutable and safe
// for concurrent use as long as each goroutine passes its own Scratch.
type Codec struct {
	cfg    Config // Key nil
	form   Form
	sidLen int
	plen   int // ServerIDLen + NonceLen
	cidLen int
	block  cipher.Block // nil for Plaintext
	f      feistel      // ThreePass, FourPass
}

// NewCodec validates c and prepares it.
func NewCodec(c Config) (*Codec, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	cd := &Codec{
		form:   c.Form(),
		sidLen: c.ServerIDLen,
		plen:   c.ServerIDLen + c.NonceLen,
		cidLen: c.CIDLen(),
	}
	if c.Key != nil {
		b, err := aes.NewCipher(c.Key)
		if err != nil {
			// Unreachable after Validate; the message must not carry the key.
			return nil, fmt.Errorf("quiclb: AES key schedule for rotation %d failed", c.Rotation)
		}
		cd.block = b
		cd.f = newFeistel(b, cd.plen)
	}
	c.Key = nil
	cd.cfg = c
	return cd, nil
}

// Config returns the configuration with its Key field nil. Mind that the
// copy's own Form and String therefore read as plaintext: ask the Codec's.
func (c *Codec) Config() Config { return c.cfg }

// Form is the configuration's encoding.
func (c *Codec) Form() Form { return c.form }

// String describes the configuration like Config.String, without the key.
func (c *Codec) String() string {
	cfg := c.cfg
	return fmtConfig(cfg.Rotation, cfg.ServerIDLen, cfg.NonceLen, c.form)
}

// CIDLen is the configuration's CID length.
func (c *Codec) CIDLen() int { return c.cidLen }

// ServerID decodes the server ID of cid (cid[0] is the first octet, whose
// rotation bits are NOT checked here) into sid[:ServerIDLen]. It reports
// false when len(cid) < CIDLen() or len(sid) < ServerIDLen; octets of cid
// past CIDLen() are ignored. It does not allocate.
func (c *Codec) ServerID(sid, cid []byte, s *Scratch) bool {
	if len(cid) < c.cidLen || len(sid) < c.sidLen {
		return false
	}
	body := cid[1:c.cidLen]
	switch c.form {
	case Plaintext:
		copy(sid[:c.sidLen], body)
	case SinglePass:
		c.block.Decrypt(s.out[:], body)
		copy(sid[:c.sidLen], s.out[:])
	case ThreePass:
		l, _ := c.f.decryptLeft(body, s)
		copy(sid[:c.sidLen], l)
	default:
		c.f.decrypt(s.p[:], body, s)
		copy(sid[:c.sidLen], s.p[:])
	}
	return true
}

// Encode writes a CID of CIDLen() octets into dst[:CIDLen()] for this server
// ID and nonce (len(sid) must be ServerIDLen, len(nonce) NonceLen). The first
// octet is Rotation<<5 | (low & 0x1f). It does not allocate.
func (c *Codec) Encode(dst, sid, nonce []byte, low byte, s *Scratch) error {
	switch {
	case len(sid) != c.sidLen:
		return errSIDLen
	case len(nonce) != c.plen-c.sidLen:
		return errNonceLen
	case len(dst) < c.cidLen:
		return errDstLen
	}
	p := s.p[:c.plen]
	copy(p, sid)
	copy(p[c.sidLen:], nonce)
	dst[0] = c.cfg.Rotation<<5 | low&0x1f
	body := dst[1:c.cidLen]
	switch c.form {
	case Plaintext:
		copy(body, p)
	case SinglePass:
		c.block.Encrypt(body, p)
	default:
		c.f.encrypt(body, p, s)
	}
	return nil
}
