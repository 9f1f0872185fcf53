package packet

import (
	"fmt"
	"testing"
)

// Benchmarks run in `make test` with -benchtime=1x, so each must work for
// b.N == 1.

func BenchmarkParse(b *testing.B) {
	cases := []struct {
		name  string
		frame []byte
	}{
		{"ipv4-tcp", tcp4Frame(b)},
		{"ipv6-hbh-tcp", ip6Chain(b, 0, []rawLayer{hopByHop(6)}, tcpLayer(nil), payload)},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var f Frame
			b.ReportAllocs()
			for b.Loop() {
				if err := Parse(c.frame, &f); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
		})
	}
}

func BenchmarkChecksum(b *testing.B) {
	for _, n := range []int{20, 64, 1500, 9000} {
		buf := make([]byte, n)
		for i := range buf {
			buf[i] = byte(i * 7)
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				_ = Checksum(buf, 0)
			}
		})
	}
}

// BenchmarkNATRewrite is the per-packet checksum work of a NAT rewrite:
// destination address and port, TTL or hop limit, all incremental.
func BenchmarkNATRewrite(b *testing.B) {
	for _, c := range []struct {
		name  string
		frame []byte
	}{{"ipv4-tcp", tcp4Frame(b)}, {"ipv6-tcp", tcp6Frame(b)}} {
		b.Run(c.name, func(b *testing.B) {
			f := mustParse(b, c.frame)
			dst4 := [4]byte{198, 18, 0, 7}
			dst6 := [16]byte{0x20, 0x01, 0, 2, 15: 7}
			// Put the TTL back each time (one byte store) so DecTTL keeps
			// doing its work rather than refusing at 1.
			ttl := &c.frame[f.L3Off+ipv4TTL]
			if f.EtherType == EtherTypeIPv6 {
				ttl = &c.frame[f.L3Off+ipv6HopLimit]
			}
			b.ReportAllocs()
			for b.Loop() {
				natRewrite(c.frame, &f, dst4, &dst6, 8080)
				*ttl = 64
			}
		})
	}
}

func BenchmarkChecksumUpdate(b *testing.B) {
	var old, new [16]byte
	new[15] = 1
	b.Run("16", func(b *testing.B) {
		c := uint16(0x1234)
		for b.Loop() {
			c = ChecksumUpdate16(c, 80, 8080)
		}
		sink = c
	})
	b.Run("32", func(b *testing.B) {
		c := uint16(0x1234)
		for b.Loop() {
			c = ChecksumUpdate32(c, 0xc6120001, 0xc6130001)
		}
		sink = c
	})
	b.Run("128", func(b *testing.B) {
		c := uint16(0x1234)
		for b.Loop() {
			c = ChecksumUpdate128(c, &old, &new)
		}
		sink = c
	})
}

var sink uint16
