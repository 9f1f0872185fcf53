package dataplane

import (
	"encoding/binary"
	"testing"

	"github.com/vipd/vipd/hashing"
)

// TestFlowMemo: a packet of the IPv4 flow the worker hashed last takes
// that flow's hashes and location (flow4's memo), which must be what
// hashing the packet gives: for any order of flows, of VIPs sharing the
// client's address and ports, of source-hash VIPs, tagged or not, and
// after a snapshot with another seed (the sequence ends with the flow it
// starts with, so the new snapshot's first packet is the memo's flow).
func TestFlowMemo(t *testing.T) {
	spec := testSpec()
	h := newHarness(t, spec)
	a := pk{src: client4, dst: vipNAT4, sport: 40000, dport: 80, flags: "A"}
	b := a
	b.sport = 40001
	c := pk{src: client4, dst: vipAll4, sport: 40000, dport: 443, flags: "A"} // source hash
	d := a
	d.dst = vipDSR4 // the same client and ports, another VIP
	e := a
	e.vlan = 7 // parsed by Parse rather than ParseCommon
	seq := []pk{a, a, b, a, c, c, d, e, a, e, e, a}
	for _, seed := range []uint64{spec.Seed, 999} {
		if seed != spec.Seed {
			spec.Seed = seed
			h.setSpec(spec)
		}
		h.w.Begin(h.snap, h.now, h.emit)
		for i, x := range seq {
			frame := build(t, x)
			var p pkt
			h.w.classify(&Desc{Buf: frame, Len: len(frame)}, &p)
			src, dst := binary.BigEndian.Uint32(x.src.AsSlice()), binary.BigEndian.Uint32(x.dst.AsSlice())
			want := hashing.Flow4(src, dst, x.sport, x.dport, 6, seed)
			wantP := want
			if x.dst == vipAll4 {
				wantP = hashing.Src4(src, seed)
			}
			if p.is&isTracked == 0 || p.h != want || p.hp != wantP || p.loc != h.w.ct.Locate(want) {
				t.Errorf("seed %d, packet %d (%v:%d > %v:%d): tracked %v, hashes %#x %#x, want %#x %#x; location %v, want %v",
					seed, i, x.src, x.sport, x.dst, x.dport, p.is&isTracked != 0, p.h, p.hp, want, wantP, p.loc, h.w.ct.Locate(want))
			}
		}
		h.w.End(0)
	}
}
