package quiclb

import (
	"bytes"
	"encoding/hex"
	"sync"
	"testing"
)

func TestGenerator(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"plaintext nonce 4", Config{Rotation: 0, ServerIDLen: 2, NonceLen: 4}},
		{"plaintext nonce 16", Config{Rotation: 5, ServerIDLen: 2, NonceLen: 16}},
		{"plaintext nonce 5 (odd)", Config{Rotation: 5, ServerIDLen: 2, NonceLen: 5}},
		{"single-pass", Config{Rotation: 1, ServerIDLen: 4, NonceLen: 12, Key: testKey}},
		{"three-pass", Config{Rotation: 2, ServerIDLen: 3, NonceLen: 4, Key: testKey}},
		{"four-pass", Config{Rotation: 3, ServerIDLen: 9, NonceLen: 6, Key: testKey}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sid := bytes.Repeat([]byte{0xc3}, tc.cfg.ServerIDLen)
			sid[0] = 0x01
			g, err := NewGenerator(tc.cfg, sid)
			if err != nil {
				t.Fatal(err)
			}
			if g.ConnectionIDLen() != tc.cfg.CIDLen() {
				t.Fatalf("ConnectionIDLen %d, want %d", g.ConnectionIDLen(), tc.cfg.CIDLen())
			}
			codec, err := NewCodec(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			d, err := NewDecoder(codec)
			if err != nil {
				t.Fatal(err)
			}
			var s Scratch
			seen := map[string]bool{}
			lows := map[byte]bool{}
			const n = 5000
			for i := 0; i < n; i++ {
				cid, err := g.GenerateConnectionID()
				if err != nil {
					t.Fatal(err)
				}
				if len(cid) != tc.cfg.CIDLen() {
					t.Fatalf("CID of %d octets", len(cid))
				}
				if cid[0]>>5 != tc.cfg.Rotation {
					t.Fatalf("CID %x: rotation %d", cid, cid[0]>>5)
				}
				lows[cid[0]&0x1f] = true
				k := string(cid[1:])
				if seen[k] {
					t.Fatalf("CID body %x issued twice", cid[1:])
				}
				seen[k] = true
				got := make([]byte, MaxServerIDLen)
				rot, m, v := d.Route(short(cid), got, &s)
				if v != Routable || rot != tc.cfg.Rotation || !bytes.Equal(got[:m], sid) {
					t.Fatalf("CID %x routes to %v rot %d sid %x", cid, v, rot, got[:m])
				}
			}
			// 5000 draws of 5 random bits miss a value with probability
			// about 32*(31/32)^5000, i.e. never.
			if len(lows) != 32 {
				t.Errorf("first-octet low bits took %d values of 32", len(lows))
			}
		})
	}
}

// TestGeneratorPlaintextNoncesLookRandom: a plaintext CID shows its nonce, so
// consecutive nonces must not be a visible counter.
func TestGeneratorPlaintextNoncesLookRandom(t *testing.T) {
	for _, nonceLen := range []int{4, 7, 16} {
		cfg := Config{ServerIDLen: 2, NonceLen: nonceLen}
		g, err := NewGenerator(cfg, []byte{7, 7})
		if err != nil {
			t.Fatal(err)
		}
		const n = 2000
		var prev []byte
		sameHigh := 0 // consecutive nonces sharing all but their last octet
		for i := 0; i < n; i++ {
			cid, err := g.GenerateConnectionID()
			if err != nil {
				t.Fatal(err)
			}
			nonce := cid[3:]
			if prev != nil && bytes.Equal(prev[:nonceLen-1], nonce[:nonceLen-1]) {
				sameHigh++
			}
			prev = nonce
		}
		// A counter shares the high octets 255 times in 256; random nonces
		// about never (2000 * 2^-24 for 4 octets).
		if sameHigh > 2 {
			t.Errorf("nonce %d: %d of %d consecutive nonces differ only in their last octet", nonceLen, sameHigh, n)
		}
	}
}

func TestGeneratorNonceExhaustion(t *testing.T) {
	g, err := NewGenerator(Config{ServerIDLen: 2, NonceLen: 4, Key: testKey}, []byte{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	// White box: skip to the last nonce of the 2^32 a 4-octet nonce has.
	g.nonce.issued = g.nonce.limit - 1
	if _, err := g.GenerateConnectionID(); err != nil {
		t.Fatalf("last nonce refused: %v", err)
	}
	if _, err := g.GenerateConnectionID(); err == nil {
		t.Fatal("a nonce was reused after 2^32 CIDs")
	}
	g8, err := NewGenerator(Config{ServerIDLen: 2, NonceLen: 8, Key: testKey}, []byte{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	if g8.nonce.limit != 0 {
		t.Errorf("8-octet nonce limit %d, want none", g8.nonce.limit)
	}
}

func TestGeneratorCounterWraps(t *testing.T) {
	// A counter that starts at ff..ff goes on at 00..00 (the random start
	// can be anywhere; only the count is limited).
	ns, err := newNonceSource(4, false)
	if err != nil {
		t.Fatal(err)
	}
	copy(ns.ctr[:], []byte{0xff, 0xff, 0xff, 0xfe})
	var s Scratch
	got := make([]byte, 4)
	for _, want := range []string{"ffffffff", "00000000", "00000001"} {
		if err := ns.next(got, &s); err != nil {
			t.Fatal(err)
		}
		if hex.EncodeToString(got) != want {
			t.Errorf("nonce %x, want %s", got, want)
		}
	}
}

func TestGeneratorErrors(t *testing.T) {
	if _, err := NewGenerator(Config{ServerIDLen: 2, NonceLen: 3}, []byte{1, 2}); err == nil {
		t.Error("invalid config accepted")
	}
	if _, err := NewGenerator(Config{ServerIDLen: 2, NonceLen: 4}, []byte{1}); err == nil {
		t.Error("server ID of the wrong length accepted")
	}
}

func TestGeneratorSwitch(t *testing.T) {
	old := Config{Rotation: 0, ServerIDLen: 3, NonceLen: 5}
	g, err := NewGenerator(old, []byte{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	next := Config{Rotation: 1, ServerIDLen: 4, NonceLen: 4, Key: testKey}
	if err := g.Switch(Config{Rotation: 1, ServerIDLen: 4, NonceLen: 5, Key: testKey}, []byte{4, 5, 6, 7}); err == nil {
		t.Error("switch to another CID length accepted")
	}
	if err := g.Switch(Config{Rotation: 7, ServerIDLen: 4, NonceLen: 4}, []byte{4, 5, 6, 7}); err == nil {
		t.Error("switch to an invalid config accepted")
	}
	if err := g.Switch(next, []byte{4, 5, 6}); err == nil {
		t.Error("switch with a short server ID accepted")
	}
	// The failed switches left the old configuration in place.
	cid, err := g.GenerateConnectionID()
	if err != nil {
		t.Fatal(err)
	}
	if cid[0]>>5 != 0 || !bytes.Equal(cid[1:4], []byte{1, 2, 3}) {
		t.Fatalf("after failed switches: %x", cid)
	}
	if err := g.Switch(next, []byte{4, 5, 6, 7}); err != nil {
		t.Fatal(err)
	}
	c, _ := NewCodec(next)
	var s Scratch
	sid := make([]byte, 4)
	for i := 0; i < 100; i++ {
		cid, err := g.GenerateConnectionID()
		if err != nil {
			t.Fatal(err)
		}
		if len(cid) != g.ConnectionIDLen() || cid[0]>>5 != 1 || !c.ServerID(sid, cid, &s) || !bytes.Equal(sid, []byte{4, 5, 6, 7}) {
			t.Fatalf("after switch: CID %x, sid %x", cid, sid)
		}
	}
}

func TestGeneratorConcurrent(t *testing.T) {
	g, err := NewGenerator(Config{Rotation: 2, ServerIDLen: 2, NonceLen: 4, Key: testKey}, []byte{9, 9})
	if err != nil {
		t.Fatal(err)
	}
	const workers, each = 4, 500
	out := make([][][]byte, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				cid, err := g.GenerateConnectionID()
				if err != nil {
					t.Error(err)
					return
				}
				out[w] = append(out[w], cid)
			}
		}()
	}
	// A switch in the middle must not tear a CID.
	if err := g.Switch(Config{Rotation: 3, ServerIDLen: 2, NonceLen: 4, Key: testKey}, []byte{9, 9}); err != nil {
		t.Error(err)
	}
	wg.Wait()
	seen := map[string]bool{}
	c2, _ := NewCodec(Config{Rotation: 2, ServerIDLen: 2, NonceLen: 4, Key: testKey})
	c3, _ := NewCodec(Config{Rotation: 3, ServerIDLen: 2, NonceLen: 4, Key: testKey})
	d, _ := NewDecoder(c2, c3)
	var s Scratch
	sid := make([]byte, MaxServerIDLen)
	for _, list := range out {
		for _, cid := range list {
			if seen[string(cid[1:])] {
				t.Fatalf("CID %x twice", cid)
			}
			seen[string(cid[1:])] = true
			if _, n, v := d.Route(short(cid), sid, &s); v != Routable || !bytes.Equal(sid[:n], []byte{9, 9}) {
				t.Fatalf("CID %x: %v %x", cid, v, sid[:n])
			}
		}
	}
	if len(seen) != workers*each {
		t.Errorf("%d CIDs, want %d", len(seen), workers*each)
	}
}
