package quiclb

import (
	"testing"
)

// Measured with: go test -run '^$' -bench . -benchmem -count=1 ./dataplane/quiclb/
func BenchmarkServerID(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  Config
	}{
		{"plaintext", Config{ServerIDLen: 2, NonceLen: 6}},
		{"single-pass", Config{ServerIDLen: 4, NonceLen: 12, Key: testKey}},
		{"three-pass", Config{ServerIDLen: 2, NonceLen: 6, Key: testKey}},
		{"four-pass", Config{ServerIDLen: 6, NonceLen: 4, Key: testKey}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c, err := NewCodec(bc.cfg)
			if err != nil {
				b.Fatal(err)
			}
			if c.Form().String() != bc.name {
				b.Fatalf("config is %v, benchmark says %s", c.Form(), bc.name)
			}
			cid, _ := testCID(b, c)
			var s Scratch
			sid := make([]byte, MaxServerIDLen)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if !c.ServerID(sid, cid, &s) {
					b.Fatal("decode failed")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/decode")
		})
	}
}

func BenchmarkRoute(b *testing.B) {
	d, codecs := testDecoder(b)
	c := codecs[3] // four-pass
	if c.Form() != FourPass {
		b.Fatalf("rotation 3 is %v", c.Form())
	}
	cid, _ := testCID(b, c)
	pkt := short(cid, make([]byte, 1200)...)
	var s Scratch
	sid := make([]byte, MaxServerIDLen)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, v := d.Route(pkt, sid, &s); v != Routable {
			b.Fatal(v)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/decode")
}

func BenchmarkEncode(b *testing.B) {
	c, err := NewCodec(Config{ServerIDLen: 6, NonceLen: 4, Key: testKey})
	if err != nil {
		b.Fatal(err)
	}
	var s Scratch
	dst, sid, nonce := make([]byte, c.CIDLen()), make([]byte, 6), make([]byte, 4)
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Encode(dst, sid, nonce, 0, &s); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGenerateConnectionID(b *testing.B) {
	g, err := NewGenerator(Config{ServerIDLen: 6, NonceLen: 4, Key: testKey}, make([]byte, 6))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.GenerateConnectionID(); err != nil {
			b.Fatal(err)
		}
	}
}
