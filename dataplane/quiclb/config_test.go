package quiclb

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
)

var testKey = []byte{0x8f, 0x95, 0xf0, 0x92, 0x45, 0x76, 0x5f, 0x80, 0x25, 0x69, 0x34, 0xe5, 0x0c, 0x66, 0x20, 0x7f}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string // substring; "" = valid
	}{
		{"minimal plaintext", Config{ServerIDLen: 1, NonceLen: 4}, ""},
		{"maximal", Config{Rotation: 6, ServerIDLen: 15, NonceLen: 4, Key: testKey}, ""},
		{"sum 19", Config{ServerIDLen: 9, NonceLen: 10, Key: testKey}, ""},
		{"single pass", Config{ServerIDLen: 8, NonceLen: 8, Key: testKey}, ""},
		{"rotation 7", Config{Rotation: 7, ServerIDLen: 2, NonceLen: 4}, "rotation 7"},
		{"rotation 200", Config{Rotation: 200, ServerIDLen: 2, NonceLen: 4}, "rotation 200"},
		{"no server ID", Config{ServerIDLen: 0, NonceLen: 4}, "server ID length 0"},
		{"negative server ID", Config{ServerIDLen: -1, NonceLen: 4}, "server ID length -1"},
		{"nonce 3", Config{ServerIDLen: 2, NonceLen: 3}, "nonce length 3"},
		{"sum 20", Config{ServerIDLen: 10, NonceLen: 10}, "= 20"},
		{"server ID 16", Config{ServerIDLen: 16, NonceLen: 4}, "= 20"},
		{"key 15", Config{ServerIDLen: 2, NonceLen: 4, Key: testKey[:15]}, "key length 15"},
		{"key 17", Config{ServerIDLen: 2, NonceLen: 4, Key: append(append([]byte{}, testKey...), 1)}, "key length 17"},
		{"empty non-nil key", Config{ServerIDLen: 2, NonceLen: 4, Key: []byte{}}, "key length 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				if _, err := NewCodec(tc.cfg); err != nil {
					t.Fatalf("NewCodec = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.wantErr)
			}
			if _, err2 := NewCodec(tc.cfg); err2 == nil {
				t.Fatal("NewCodec accepted an invalid config")
			}
			assertNoKey(t, err.Error(), tc.cfg.Key)
		})
	}
}

func assertNoKey(t *testing.T, s string, key []byte) {
	t.Helper()
	if len(key) < 4 {
		return
	}
	for _, k := range []string{hex.EncodeToString(key[:4]), fmt.Sprint(key[:4])[1:8], string(key[:4])} {
		if strings.Contains(strings.ToLower(s), k) {
			t.Errorf("%q shows key bytes (%q)", s, k)
		}
	}
}

func TestFormAndString(t *testing.T) {
	tests := []struct {
		cfg  Config
		form Form
		str  string
	}{
		{Config{Rotation: 0, ServerIDLen: 2, NonceLen: 6}, Plaintext, "rotation 0: server ID 2, nonce 6, plaintext"},
		{Config{Rotation: 1, ServerIDLen: 8, NonceLen: 8, Key: testKey}, SinglePass, "rotation 1: server ID 8, nonce 8, single-pass"},
		{Config{Rotation: 2, ServerIDLen: 2, NonceLen: 6, Key: testKey}, ThreePass, "rotation 2: server ID 2, nonce 6, three-pass"},
		{Config{Rotation: 3, ServerIDLen: 4, NonceLen: 4, Key: testKey}, ThreePass, "rotation 3: server ID 4, nonce 4, three-pass"},
		{Config{Rotation: 4, ServerIDLen: 5, NonceLen: 4, Key: testKey}, FourPass, "rotation 4: server ID 5, nonce 4, four-pass"},
		{Config{Rotation: 5, ServerIDLen: 9, NonceLen: 8, Key: testKey}, FourPass, "rotation 5: server ID 9, nonce 8, four-pass"},
	}
	for _, tc := range tests {
		t.Run(tc.str, func(t *testing.T) {
			if f := tc.cfg.Form(); f != tc.form {
				t.Errorf("Form = %v, want %v", f, tc.form)
			}
			c, err := NewCodec(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if c.Form() != tc.form || c.String() != tc.str || tc.cfg.String() != tc.str {
				t.Errorf("codec %v %q, config %q; want %q", c.Form(), c.String(), tc.cfg.String(), tc.str)
			}
			if c.Config().Key != nil {
				t.Error("Codec.Config kept the key")
			}
			if c.CIDLen() != tc.cfg.CIDLen() || tc.cfg.CIDLen() != 1+tc.cfg.ServerIDLen+tc.cfg.NonceLen {
				t.Errorf("CIDLen %d / %d", c.CIDLen(), tc.cfg.CIDLen())
			}
			for _, s := range []string{fmt.Sprint(tc.cfg), fmt.Sprintf("%+v", tc.cfg), fmt.Sprintf("%#v", tc.cfg), fmt.Sprintf("%v", c)} {
				assertNoKey(t, s, tc.cfg.Key)
			}
		})
	}
}

func TestNewCodecCopiesNothingOfTheKey(t *testing.T) {
	key := append([]byte{}, testKey...)
	c, err := NewCodec(Config{ServerIDLen: 3, NonceLen: 4, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	var s Scratch
	cid := make([]byte, c.CIDLen())
	if err := c.Encode(cid, []byte{1, 2, 3}, []byte{4, 5, 6, 7}, 0, &s); err != nil {
		t.Fatal(err)
	}
	for i := range key { // the caller may wipe its key
		key[i] = 0
	}
	cid2 := make([]byte, c.CIDLen())
	if err := c.Encode(cid2, []byte{1, 2, 3}, []byte{4, 5, 6, 7}, 0, &s); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(cid, cid2) {
		t.Error("the codec depends on the caller's key slice after NewCodec")
	}
}

func TestEncodeErrors(t *testing.T) {
	c, err := NewCodec(Config{Rotation: 2, ServerIDLen: 3, NonceLen: 5, Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	var s Scratch
	tests := []struct {
		name           string
		dst, sid, nonc int
		ok             bool
	}{
		{"ok", 9, 3, 5, true},
		{"dst longer", 20, 3, 5, true},
		{"dst short", 8, 3, 5, false},
		{"sid short", 9, 2, 5, false},
		{"sid long", 9, 4, 5, false},
		{"nonce short", 9, 3, 4, false},
		{"nonce long", 9, 3, 6, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := c.Encode(make([]byte, tc.dst), make([]byte, tc.sid), make([]byte, tc.nonc), 0xff, &s)
			if (err == nil) != tc.ok {
				t.Fatalf("Encode = %v, want ok=%v", err, tc.ok)
			}
		})
	}
	dst := make([]byte, 9)
	if err := c.Encode(dst, []byte{1, 2, 3}, []byte{1, 2, 3, 4, 5}, 0xff, &s); err != nil {
		t.Fatal(err)
	}
	if dst[0] != 2<<5|0x1f {
		t.Errorf("first octet %#x, want %#x", dst[0], 2<<5|0x1f)
	}
}

func TestServerIDShortInputs(t *testing.T) {
	for _, cfg := range []Config{
		{ServerIDLen: 3, NonceLen: 4},
		{ServerIDLen: 8, NonceLen: 8, Key: testKey},
		{ServerIDLen: 3, NonceLen: 4, Key: testKey},
		{ServerIDLen: 5, NonceLen: 4, Key: testKey},
	} {
		c, err := NewCodec(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var s Scratch
		if c.ServerID(make([]byte, cfg.ServerIDLen), make([]byte, cfg.CIDLen()-1), &s) {
			t.Errorf("%v: decoded a CID one octet short", cfg)
		}
		if c.ServerID(make([]byte, cfg.ServerIDLen-1), make([]byte, cfg.CIDLen()), &s) {
			t.Errorf("%v: decoded into a server ID buffer one octet short", cfg)
		}
		if !c.ServerID(make([]byte, cfg.ServerIDLen), make([]byte, MaxCIDLen), &s) {
			t.Errorf("%v: refused a CID longer than its own", cfg)
		}
	}
}

func TestNewDecoder(t *testing.T) {
	a, _ := NewCodec(Config{Rotation: 1, ServerIDLen: 2, NonceLen: 4})
	b, _ := NewCodec(Config{Rotation: 1, ServerIDLen: 3, NonceLen: 4, Key: testKey})
	c, _ := NewCodec(Config{Rotation: 6, ServerIDLen: 3, NonceLen: 4, Key: testKey})
	if _, err := NewDecoder(a, b); err == nil {
		t.Error("two codecs at rotation 1 accepted")
	}
	if _, err := NewDecoder(a, nil); err == nil {
		t.Error("nil codec accepted")
	}
	d, err := NewDecoder(a, c)
	if err != nil {
		t.Fatal(err)
	}
	for rot := uint8(0); rot < 10; rot++ {
		want := map[uint8]*Codec{1: a, 6: c}[rot]
		if got := d.Codec(rot); got != want {
			t.Errorf("Codec(%d) = %v, want %v", rot, got, want)
		}
	}
	if _, err := NewDecoder(); err != nil {
		t.Errorf("empty decoder: %v", err)
	}
}

func TestStrings(t *testing.T) {
	for v := Routable; v <= NoSourceCID; v++ {
		if s := v.String(); s == "" || strings.HasPrefix(s, "Verdict(") {
			t.Errorf("verdict %d has no name", v)
		}
	}
	if s := Verdict(99).String(); s != "Verdict(99)" {
		t.Errorf("Verdict(99) = %q", s)
	}
	if s := Form(9).String(); s != "Form(9)" {
		t.Errorf("Form(9) = %q", s)
	}
}

// TestKeyCheck: a codec's key check value tells keys apart and is the
// same for the same key, whatever the rest of the configuration; it is
// zero without a key, and it is not the key.
func TestKeyCheck(t *testing.T) {
	key2 := bytes.Repeat([]byte{0x5a}, KeyLen)
	mk := func(c Config) [16]byte {
		t.Helper()
		codec, err := NewCodec(c)
		if err != nil {
			t.Fatal(err)
		}
		return codec.KeyCheck()
	}
	a := mk(Config{Rotation: 0, ServerIDLen: 3, NonceLen: 4, Key: testKey})
	if b := mk(Config{Rotation: 5, ServerIDLen: 8, NonceLen: 8, Key: testKey}); a != b {
		t.Error("the same key, two check values")
	}
	if c := mk(Config{Rotation: 0, ServerIDLen: 3, NonceLen: 4, Key: key2}); a == c {
		t.Error("two keys, one check value")
	}
	if z := mk(Config{Rotation: 0, ServerIDLen: 3, NonceLen: 4}); z != ([16]byte{}) {
		t.Errorf("plaintext check value %x, want zero", z)
	}
	if bytes.Equal(a[:], testKey) || a == ([16]byte{}) {
		t.Error("the check value is the key, or zero")
	}
}
