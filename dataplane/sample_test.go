package dataplane

import (
	"encoding/binary"
	"testing"
)

// TestL4ChecksumSample: a sender with TX checksum offload hands over
// segments whose checksum holds only the pseudo-header sum. vipd forwards
// them (it does not verify, like a router) but counts them on its sample,
// so the cause of hung connections shows in the metrics.
func TestL4ChecksumSample(t *testing.T) {
	tests := []struct {
		name    string
		partial bool
		want    uint64
	}{
		{"complete checksums", false, 0},
		{"partial checksums", true, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, testSpec())
			for i := 0; i < 4*l4SampleEvery; i++ {
				f := build(t, pk{src: client4, dst: vipNAT4, sport: uint16(2000 + i), dport: 80, flags: "PA", payload: payloadOf(100)})
				if tt.partial {
					// What CHECKSUM_PARTIAL leaves in the field: the
					// pseudo-header sum, not complemented.
					l4 := f[14+20:]
					var s uint32
					for _, w := range []uint16{
						binary.BigEndian.Uint16(f[14+12:]), binary.BigEndian.Uint16(f[14+14:]),
						binary.BigEndian.Uint16(f[14+16:]), binary.BigEndian.Uint16(f[14+18:]),
						6, uint16(len(l4)),
					} {
						s += uint32(w)
					}
					s = s&0xffff + s>>16
					binary.BigEndian.PutUint16(l4[16:], uint16(s))
				}
				if d := h.run(f)[0]; d.Verdict != VerdictTX {
					t.Fatalf("packet %d: %v %v: sampled packets are forwarded all the same", i, d.Verdict, d.Reason)
				}
			}
			c := h.w.Counters()
			if c.L4ChecksumSampled != 4 || c.L4ChecksumBad != tt.want {
				t.Errorf("sampled %d, bad %d; want 4, %d", c.L4ChecksumSampled, c.L4ChecksumBad, tt.want)
			}
		})
	}
}
