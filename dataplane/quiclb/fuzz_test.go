package quiclb

import (
	"bytes"
	"testing"
)

// fuzzConfig maps arbitrary octets onto a valid configuration.
func fuzzConfig(rot, sidLen, nonceLen uint8, key []byte) Config {
	c := Config{Rotation: rot % NumConfigs}
	c.ServerIDLen = MinServerIDLen + int(sidLen)%MaxServerIDLen                          // 1..15
	c.NonceLen = MinNonceLen + int(nonceLen)%(MaxIDNonceLen-c.ServerIDLen-MinNonceLen+1) // 4..19-sid
	if len(key) > 0 {
		c.Key = make([]byte, KeyLen)
		copy(c.Key, key)
	}
	return c
}

func FuzzRoundTrip(f *testing.F) {
	f.Add(uint8(0), uint8(2), uint8(0), []byte(nil), []byte("sid"), []byte("nonce"), byte(0))
	f.Add(uint8(1), uint8(9), uint8(1), testKey, []byte("server-id"), []byte("n"), byte(0x1f))
	f.Add(uint8(2), uint8(7), uint8(4), testKey, []byte("eight!!!"), []byte("eight???"), byte(3))              // single pass
	f.Add(uint8(3), uint8(2), uint8(5), testKey, []byte{0xed, 0x79, 0x3a}, []byte{0xee, 8, 13, 0xbf}, byte(7)) // odd, 3 passes
	f.Add(uint8(6), uint8(14), uint8(0), []byte{1}, []byte{}, []byte{}, byte(0xff))                            // 15+4, four-pass
	f.Fuzz(func(t *testing.T, rot, sidLen, nonceLen uint8, key, sidSeed, nonceSeed []byte, low byte) {
		cfg := fuzzConfig(rot, sidLen, nonceLen, key)
		if err := cfg.Validate(); err != nil {
			t.Fatalf("fuzzConfig made an invalid config %v: %v", cfg, err)
		}
		c, err := NewCodec(cfg)
		if err != nil {
			t.Fatal(err)
		}
		sid := make([]byte, cfg.ServerIDLen)
		copy(sid, sidSeed)
		nonce := make([]byte, cfg.NonceLen)
		copy(nonce, nonceSeed)
		var s Scratch
		cid := make([]byte, cfg.CIDLen())
		if err := c.Encode(cid, sid, nonce, low, &s); err != nil {
			t.Fatal(err)
		}
		if cid[0] != cfg.Rotation<<5|low&0x1f {
			t.Fatalf("first octet %#x", cid[0])
		}
		got := make([]byte, MaxServerIDLen)
		if !c.ServerID(got, cid, &s) || !bytes.Equal(got[:cfg.ServerIDLen], sid) {
			t.Fatalf("%v: ServerID(Encode(%x, %x)) = %x", cfg, sid, nonce, got[:cfg.ServerIDLen])
		}
		if cfg.Key != nil && cfg.Form() != SinglePass {
			// The full inverse recovers the nonce too: the Feistel network
			// is a permutation, so distinct nonces give distinct CIDs.
			p := make([]byte, cfg.ServerIDLen+cfg.NonceLen)
			c.f.decrypt(p, cid[1:], &s)
			if !bytes.Equal(p, append(append([]byte{}, sid...), nonce...)) {
				t.Fatalf("%v: decrypt(encrypt(%x||%x)) = %x", cfg, sid, nonce, p)
			}
		}
		d, err := NewDecoder(c)
		if err != nil {
			t.Fatal(err)
		}
		r, n, v := d.Route(short(cid), got, &s)
		if v != Routable || r != cfg.Rotation || !bytes.Equal(got[:n], sid) {
			t.Fatalf("%v: Route = %d %v %x", cfg, r, v, got[:n])
		}
	})
}

func FuzzRoute(f *testing.F) {
	d, codecs := testDecoder(f)
	for _, c := range codecs {
		cid, _ := testCID(f, c)
		f.Add(short(cid, 1, 2, 3))
		f.Add(long(v1Handshake, 1, cid, cid, 0))
		f.Add(long(v1Initial, 1, cid, cid)[:10])
	}
	f.Add([]byte{})
	f.Add([]byte{0x80, 0, 0, 0, 0, 0})
	f.Add([]byte{0xd0, 0x6b, 0x33, 0x43, 0xcf, 1, 0x20})
	f.Fuzz(func(t *testing.T, p []byte) {
		var s Scratch
		sid := make([]byte, MaxServerIDLen)
		for _, route := range []func(p, sid []byte, s *Scratch) (uint8, int, Verdict){d.Route, d.RouteSource} {
			rot, n, v := route(p, sid, &s)
			if n < 0 || n > len(sid) {
				t.Fatalf("n = %d", n)
			}
			switch v {
			case Routable:
				c := d.Codec(rot)
				if c == nil || n != c.Config().ServerIDLen {
					t.Fatalf("routable at rotation %d with n %d", rot, n)
				}
			case FiveTuple:
				if rot != Unroutable || n != 0 {
					t.Fatalf("five-tuple with rot %d n %d", rot, n)
				}
			case NotQUIC, ClientChosen, UnknownConfig, ShortCID, NoSourceCID, UnknownVersion:
				if n != 0 {
					t.Fatalf("%v with n %d", v, n)
				}
			default:
				t.Fatalf("verdict %v", v)
			}
		}
	})
}
