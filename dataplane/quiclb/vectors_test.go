package quiclb

import (
	"bytes"
	"crypto/aes"
	"encoding/hex"
	"testing"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// The draft's "Load Balancer Test Vectors" (draft-ietf-quic-load-balancers-21,
// appendix), verbatim. The servers there self-encode the CID length in the
// low 5 bits of the first octet; low is what the encoder is given for them.
var draftVectors = []struct {
	name    string
	rot     uint8
	key     string
	sid     string
	nonce   string
	cid     string // verbatim from the draft
	wantCID string // what a correct encoder writes, when the draft's differs
	form    Form
}{
	{
		name: "unencrypted/0", rot: 0,
		sid: "c4605e", nonce: "4504cc4f", cid: "07c4605e4504cc4f",
		form: Plaintext,
	},
	{
		// Erratum: the draft prints this row as
		//	1 350d28b420 3487d970b 20a350d28b4203487d970b
		// The nonce has 9 hex digits, and the CID is the text "2" "0a"
		// (rotation 1, length 10) followed by the two columns. As octets,
		// the CID 20a350d28b4203487d970b is still a valid rotation-1 CID of
		// 11 octets: first octet 0x20 (length bits 0, not 10), server ID
		// a350d28b42, nonce 03487d970b. We test it as those octets.
		name: "unencrypted/1", rot: 1,
		sid: "a350d28b42", nonce: "03487d970b", cid: "20a350d28b4203487d970b",
		form: Plaintext,
	},
	{
		name: "encrypted/0", rot: 0, key: "8f95f09245765f80256934e50c66207f",
		sid: "ed793a", nonce: "ee080dbf", cid: "0720b1d07b359d3c",
		form: ThreePass,
	},
	{
		// Odd length 15 and a server ID longer than the nonce: the decoder
		// needs the fourth pass.
		name: "encrypted/1", rot: 1, key: "8f95f09245765f80256934e50c66207f",
		sid: "ed793a51d49b8f5fab65", nonce: "ee080dbf48", cid: "2fcc381bc74cb4fbad2823a3d1f8fed2",
		form: FourPass,
	},
	{
		name: "encrypted/2", rot: 2, key: "8f95f09245765f80256934e50c66207f",
		sid: "ed793a51d49b8f5f", nonce: "ee080dbf48c0d1e5", cid: "504dd2d05a7b0de9b2b9907afb5ecf8cc3",
		form: SinglePass,
	},
	{
		// Erratum: the row says cr_bits 3, but its CID's first octet 0x12
		// is rotation 0, length 18. The rest of the CID is right; an
		// encoder at rotation 3 writes 0x72 (0b011_10010) first.
		name: "encrypted/3", rot: 3, key: "8f95f09245765f80256934e50c66207f",
		sid: "ed793a51d49b8f5fab", nonce: "ee080dbf48c0d1e55d", cid: "125779c9cc86beb3a3a4a3ca96fce4bfe0cdbc",
		wantCID: "725779c9cc86beb3a3a4a3ca96fce4bfe0cdbc",
		form:    ThreePass,
	},
	{
		// The draft's four-pass "Encryption Example". Erratum: its step 10
		// prints aes_output 0xb334357c... and then XORs with 0xb3e4357c; the
		// result it gives, 0x67947d2c, follows from 0xb334357c. The CID
		// below is the example's final one.
		name: "encryption-example", rot: 0, key: "fdf726a9893ec05c0632d3956680baf0",
		sid: "31441a", nonce: "9c69c275", cid: "0767947d29be054a",
		form: ThreePass,
	},
}

func TestDraftVectors(t *testing.T) {
	for _, tc := range draftVectors {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Rotation: tc.rot, ServerIDLen: len(tc.sid) / 2, NonceLen: len(tc.nonce) / 2}
			if tc.key != "" {
				cfg.Key = unhex(t, tc.key)
			}
			codec, err := NewCodec(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := codec.Form(); got != tc.form {
				t.Errorf("form %v, want %v", got, tc.form)
			}
			cid := unhex(t, tc.cid)
			want := cid
			if tc.wantCID != "" {
				want = unhex(t, tc.wantCID)
			}
			if len(cid) != cfg.CIDLen() {
				t.Fatalf("CID of %d octets, config says %d", len(cid), cfg.CIDLen())
			}
			var s Scratch

			// Encode, with the low bits the draft's server chose.
			got := make([]byte, cfg.CIDLen())
			if err := codec.Encode(got, unhex(t, tc.sid), unhex(t, tc.nonce), cid[0]&0x1f, &s); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("Encode = %x, want %x", got, want)
			}

			// Decode the draft's CID verbatim (ServerID ignores the
			// rotation bits, so the cr_bits-3 row decodes as printed).
			sid := make([]byte, MaxServerIDLen)
			if !codec.ServerID(sid, cid, &s) {
				t.Fatal("ServerID failed")
			}
			if g, w := hex.EncodeToString(sid[:cfg.ServerIDLen]), tc.sid; g != w {
				t.Errorf("ServerID = %s, want %s", g, w)
			}

			// And through a Decoder, as a short-header packet.
			d, err := NewDecoder(codec)
			if err != nil {
				t.Fatal(err)
			}
			pkt := append([]byte{0x40}, want...)
			rot, n, v := d.Route(pkt, sid, &s)
			if v != Routable || rot != tc.rot || hex.EncodeToString(sid[:n]) != tc.sid {
				t.Errorf("Route = rot %d, sid %x, %v; want rot %d, sid %s, routable", rot, sid[:n], v, tc.rot, tc.sid)
			}
		})
	}
}

// TestEncryptionExampleSteps checks the intermediate values of the draft's
// four-pass encryption example, pass by pass.
func TestEncryptionExampleSteps(t *testing.T) {
	b, err := aes.NewCipher(unhex(t, "fdf726a9893ec05c0632d3956680baf0"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFeistel(b, 7)
	var s Scratch
	l, r := f.split(unhex(t, "31441a9c69c275"), &s)
	step := func(name string, got []byte, want string) {
		t.Helper()
		if hex.EncodeToString(got) != want {
			t.Errorf("%s = %x, want %s", name, got, want)
		}
	}
	step("left_0", l[:4], "31441a90")
	step("right_0", r[:4], "0c69c275")
	f.round(r, l, 1, &f.maskR, &s)
	step("aes_input 1", l[:], "31441a90000000000000000000000701") // l is its own expand()
	step("aes_output 1", s.out[:], "a255dd8cdacf01948d3a848c3c7fee23")
	step("right_1", r[:4], "0e3c1ff9")
	f.round(l, r, 2, &f.maskL, &s)
	step("aes_output 2", s.out[:], "e5e452cb9e1bedb0b2bf830506bf4c4e")
	step("left_1", l[:4], "d4a04850")
	f.round(r, l, 3, &f.maskR, &s)
	step("aes_output 3", s.out[:], "b7821ab3024fed0913b6a04d18e3216f")
	step("right_2", r[:4], "09be054a")
	left1 := *l
	f.round(l, r, 4, &f.maskL, &s)
	// Erratum: the draft XORs with 0xb3e4357c, but its own aes_output (and
	// its result, 0x67947d2c before clearing) says 0xb334357c.
	step("aes_output 4", s.out[:], "b334357cfdf81e3fafe180154eaf7378")
	for i := range 4 {
		left1[i] ^= s.out[i]
	}
	step("left_2 before clearing", left1[:4], "67947d2c")
	step("left_2", l[:4], "67947d20")
	// Past its 4 octets, left_2 is zero; right_2 was the last round's
	// input and carries its expand() tail.
	step("left_2 array", l[:], "67947d20000000000000000000000000")
	step("right_2 array", r[:], "09be054a000000000000000000000704")
	out := make([]byte, 7)
	f.join(out, l, r)
	step("ciphertext", out, "67947d29be054a")
}
