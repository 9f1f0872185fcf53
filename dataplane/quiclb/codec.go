package quiclb

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"fmt"
)

// Scratch holds the per-goroutine buffers the AES passes need, so that
// nothing escapes to the heap per call. Its zero value is ready; a worker
// keeps one and never shares it while a call is running.
type Scratch struct {
	out  [aes.BlockSize]byte // AES output
	l, r half                // Feistel halves
	p    [aes.BlockSize + 4]byte
}

// half is one Feistel half, at most 10 octets, in a 16-octet array whose
// octets past the half's length (and the unused nibble, for odd lengths)
// are zero, but for the last two: the whole array is the round function's
// input, expand(plen, pass, half), once round has written plen and pass
// there. Copying the half into a separate AES input block instead made a
// four-pass decode about 10% slower (116 against 102 ns here).
type half [aes.BlockSize]byte

// feistel is the draft's four-round Feistel network over plen octets
// (5..19 in the draft; the Generator also runs it over a 4..18-octet nonce)
// with AES-128-ECB as the round function.
type feistel struct {
	block cipher.Block
	plen  int // plaintext length in octets
	half  int // plen/2 rounded up; the two halves share an octet when plen is odd
	// Masks of the octets (and, for odd lengths, nibbles) each half owns,
	// as two little-endian words: left keeps the middle octet's high
	// nibble, right its low one.
	maskL, maskR [2]uint64
}

func newFeistel(b cipher.Block, plen int) feistel {
	f := feistel{block: b, plen: plen, half: (plen + 1) / 2}
	var ml, mr half
	for i := 0; i < f.half; i++ {
		ml[i], mr[i] = 0xff, 0xff
	}
	if plen&1 == 1 {
		ml[f.half-1] = 0xf0
		mr[0] = 0x0f
	}
	f.maskL = [2]uint64{binary.LittleEndian.Uint64(ml[:8]), binary.LittleEndian.Uint64(ml[8:])}
	f.maskR = [2]uint64{binary.LittleEndian.Uint64(mr[:8]), binary.LittleEndian.Uint64(mr[8:])}
	return f
}

// round is one pass: dst ^= truncate(AES(expand(plen, pass, src)), half),
// then dst's foreign nibble and tail are cleared with mask (the draft's
// "clear the first/last four bits" steps).
func (f *feistel) round(dst, src *half, pass byte, mask *[2]uint64, s *Scratch) {
	// src is its own expand(): its tail is zero; the length and pass go in
	// the last two octets, which dst's mask clears again when src is next
	// written.
	src[14] = byte(f.plen)
	src[15] = pass
	f.block.Encrypt(s.out[:], src[:])
	le := binary.LittleEndian
	le.PutUint64(dst[:8], (le.Uint64(dst[:8])^le.Uint64(s.out[:8]))&mask[0])
	le.PutUint64(dst[8:], (le.Uint64(dst[8:])^le.Uint64(s.out[8:]))&mask[1])
}

// split loads src[:plen] into s.l and s.r.
func (f *feistel) split(src []byte, s *Scratch) (l, r *half) {
	l, r = &s.l, &s.r
	*l, *r = half{}, half{}
	copy(l[:f.half], src[:f.half])
	copy(r[:f.half], src[f.plen-f.half:f.plen])
	if f.plen&1 == 1 { // the middle octet: high nibble left, low nibble right
		l[f.half-1] &= 0xf0
		r[0] &= 0x0f
	}
	return l, r
}

// join writes l||r (the shared octet merged when plen is odd) to dst[:plen].
func (f *feistel) join(dst []byte, l, r *half) {
	copy(dst[:f.half], l[:f.half])
	if f.plen&1 == 1 {
		dst[f.half-1] |= r[0]
		copy(dst[f.half:f.plen], r[1:f.half])
		return
	}
	copy(dst[f.half:f.plen], r[:f.half])
}

// encrypt runs the four passes over src[:plen] into dst[:plen]; dst and src
// may overlap exactly.
func (f *feistel) encrypt(dst, src []byte, s *Scratch) {
	l, r := f.split(src, s)
	f.round(r, l, 1, &f.maskR, s)
	f.round(l, r, 2, &f.maskL, s)
	f.round(r, l, 3, &f.maskR, s)
	f.round(l, r, 4, &f.maskL, s)
	f.join(dst, l, r)
}

// decryptLeft runs passes 4, 3, 2 over src[:plen] and returns left_0 (in
// s.l) and right_1 (in s.r). (The draft's decryption pseudocode clears
// left_1's first bits after computing right_1; it is right_1's, as in
// encryption step 5, and round does that.)
func (f *feistel) decryptLeft(src []byte, s *Scratch) (l, r *half) {
	l, r = f.split(src, s)
	f.round(l, r, 4, &f.maskL, s)
	f.round(r, l, 3, &f.maskR, s)
	f.round(l, r, 2, &f.maskL, s)
	return l, r
}

// decrypt runs all four passes back: dst[:plen] = plaintext.
func (f *feistel) decrypt(dst, src []byte, s *Scratch) {
	l, r := f.decryptLeft(src, s)
	f.round(r, l, 1, &f.maskR, s)
	f.join(dst, l, r)
}

// Codec is a prepared configuration: the AES key schedule is computed once,
// in NewCodec, and the key itself is not kept. A Codec is immutable and safe
// for concurrent use as long as each goroutine passes its own Scratch.
type Codec struct {
	cfg    Config // Key nil
	kcv    [16]byte
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
		b.Encrypt(cd.kcv[:], kcvBlock[:])
	}
	c.Key = nil
	cd.cfg = c
	return cd, nil
}

// kcvBlock is the block whose encryption is a Codec's key check value.
var kcvBlock = [16]byte{'v', 'i', 'p', 'd', ' ', 'q', 'u', 'i', 'c', '-', 'l', 'b', ' ', 'k', 'c', 'v'}

// KeyCheck returns a key check value of the configuration's key: a fixed
// block encrypted under it (all zero for plaintext). Two codecs with the
// same key have the same value, two keys (almost surely) different ones,
// and the value reveals nothing of the key that an encryption of one known
// block does not: it lets the caller tell whether a reload changed a key
// (the XDP fast path's generation) without keeping the key.
func (c *Codec) KeyCheck() [16]byte { return c.kcv }

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
		copy(sid[:c.sidLen], l[:])
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
