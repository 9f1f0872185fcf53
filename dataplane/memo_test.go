package dataplane

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/google/gopacket/layers"

	"github.com/vipd/vipd/conntrack"
	"github.com/vipd/vipd/hashing"
)

// TestFlowMemo: a packet of the flow the worker hashed last in its family
// takes that flow's hashes and location (flow4's memo, classify6's),
// which must be what hashing the packet gives: for any order of flows, of
// both families, of VIPs sharing the client's address and ports, of
// source-hash VIPs, tagged or not, and after a snapshot with another seed
// (the sequence ends with the flows it starts with, so the new snapshot's
// first packets are the memos' flows). Each new flow gets a serial no
// flow of either family had before it.
func TestFlowMemo(t *testing.T) {
	spec := testSpec()
	vipAll6 := netip.MustParseAddr("2001:2::103")
	spec.VIPs = append(spec.VIPs, VIPSpec{ID: 40, Name: "all6", Addr: vipAll6, Port: 0, Proto: 6, Mode: ModeNAT, SrcHash: true,
		TableSize: 65537, Backends: backends("2001:2:1::4", 40, 0)})
	h := newHarness(t, spec)
	a := pk{src: client4, dst: vipNAT4, sport: 40000, dport: 80, flags: "A"}
	b := a
	b.sport = 40001
	c := pk{src: client4, dst: vipAll4, sport: 40000, dport: 443, flags: "A"} // source hash
	d := a
	d.dst = vipDSR4 // the same client and ports, another VIP
	e := a
	e.vlan = 7 // parsed by Parse rather than ParseCommon
	a6 := pk{src: client6, dst: vipNAT6, sport: 40000, dport: 80, flags: "A"}
	b6 := a6
	b6.sport = 40001
	c6 := pk{src: client6, dst: vipAll6, sport: 40000, dport: 443, flags: "A"}
	d6 := a6
	d6.dst = vipDSR6
	e6 := a6
	e6.src = client6.Next() // another client, the same ports
	seq := []pk{a, a6, a, a6, b, a, c, c, b6, a6, c6, c6, a6, d, e, d6, e6, a6, a, e, e, a6, a}
	for _, seed := range []uint64{spec.Seed, 999} {
		if seed != spec.Seed {
			spec.Seed = seed
			h.setSpec(spec)
		}
		h.w.Begin(h.snap, h.now, h.emit)
		serials := map[uint64]pk{}
		var last4, last6 pk
		for i, x := range seq {
			frame := build(t, x)
			var p pkt
			h.w.classify(&Desc{Buf: frame, Len: len(frame)}, &p)
			var want, wantP uint64
			if x.src.Is4() {
				src, dst := binary.BigEndian.Uint32(x.src.AsSlice()), binary.BigEndian.Uint32(x.dst.AsSlice())
				want = hashing.Flow4(src, dst, x.sport, x.dport, 6, seed)
				wantP = want
				if x.dst == vipAll4 {
					wantP = hashing.Src4(src, seed)
				}
			} else {
				src, dst := x.src.As16(), x.dst.As16()
				want = hashing.Flow6(&src, &dst, x.sport, x.dport, 6, seed)
				wantP = want
				if x.dst == vipAll6 {
					wantP = hashing.Src6(&src, seed)
				}
			}
			if p.is&isTracked == 0 || p.h != want || p.hp != wantP || p.loc != h.w.ct.Locate(want) {
				t.Errorf("seed %d, packet %d (%v:%d > %v:%d): tracked %v, hashes %#x %#x, want %#x %#x; location %v, want %v",
					seed, i, x.src, x.sport, x.dst, x.dport, p.is&isTracked != 0, p.h, p.hp, want, wantP, p.loc, h.w.ct.Locate(want))
			}
			// The same flow as the last of its family: its serial;
			// another: a serial no flow had.
			last := &last4
			if x.src.Is6() {
				last = &last6
			}
			same := x.src == last.src && x.dst == last.dst && x.sport == last.sport && x.dport == last.dport
			if y, ok := serials[p.serial]; p.serial == 0 || ok && (!same || y.src != x.src || y.dst != x.dst || y.sport != x.sport) {
				t.Errorf("seed %d, packet %d (%v:%d > %v:%d): serial %d (before: %v:%d > %v:%d)", seed, i, x.src, x.sport, x.dst, x.dport, p.serial, y.src, y.sport, y.dst, y.dport)
			} else if !ok && same {
				t.Errorf("seed %d, packet %d: a new serial for the flow of the packet before it in its family", seed, i)
			}
			serials[p.serial] = x
			*last = x
		}
		h.w.End(0)
	}
}

// TestLookupMemo: a burst's packet takes the entry of the lookup before
// it (Worker.lookup) only while a lookup would return that entry. Runs of
// one flow's packets (SYN, ACK, RST, FIN, SYN-ACK mixed; NAT, DSR and
// UDP VIPs, IPv4 and IPv6) among 3,000 flows, with new IPv6 flows between
// a run's packets, in a table of 1,024 (evictions, relocations), in
// batches of 64 with time passing between them (300 ms, or 40 s:
// expiry), must give exactly the verdicts, frames, emitted frames and
// counters of a worker that looks every packet up.
func TestLookupMemo(t *testing.T) {
	snap, err := NewSnapshot(testSpec())
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var frames [][]byte
	runs := 0
	for len(frames) < 20000 {
		fl := rng.IntN(3000)
		p := pk{src: netip.AddrFrom4([4]byte{198, 18, 0, byte(1 + fl%200)}), dst: vipNAT4, sport: uint16(1024 + fl), dport: 80, proto: layers.IPProtocolTCP}
		switch fl % 5 {
		case 1:
			p.dst = vipDSR4
		case 2:
			p.dst, p.dport, p.proto = vipUDP4, 7000, layers.IPProtocolUDP
		case 3, 4: // IPv6 runs, NAT and DSR (classify6's memo)
			p.src = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: 1, 15: byte(fl % 200)})
			p.dst = []netip.Addr{vipNAT6, vipDSR6}[fl%5-3]
		}
		n := 1 + rng.IntN(6)
		if n > 1 {
			runs++
		}
		for j := range n {
			if j > 0 && rng.IntN(3) == 0 {
				// Between two of the run's packets, an IPv6 flow's:
				// inserted into the full table, it may evict or move
				// the run's flow (the IPv4 memo stays on it).
				fl6 := rng.IntN(3000)
				frames = append(frames, build(t, pk{src: netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(fl6)}), dst: vipNAT6,
					sport: uint16(1024 + fl6), dport: 80, flags: "S", proto: layers.IPProtocolTCP}))
			}
			if p.proto == layers.IPProtocolTCP {
				p.flags = []string{"S", "A", "A", "A", "A", "R", "F", "SA"}[rng.IntN(8)]
			}
			frames = append(frames, build(t, p))
		}
	}
	// Both tables with one secret, so that the same flows share buckets
	// and the same ones are evicted.
	harness := func() *harness {
		ct, err := conntrack.New(conntrack.Config{Capacity: 1024, Shards: 1, BucketKey: [16]byte{1, 2, 3}})
		if err != nil {
			t.Fatal(err)
		}
		return &harness{t: t, w: NewWorker(ct.Shard(0), WorkerOptions{}), snap: snap, now: 1e9, emit: &sliceEmitter{}}
	}
	memo, plain := harness(), harness()
	for start := 0; start < len(frames); start += 64 {
		chunk := frames[start:min(start+64, len(frames))]
		batch := memo.run(chunk...)
		plain.emit.frames = plain.emit.frames[:0]
		plain.w.Begin(snap, plain.now, plain.emit)
		for i, f := range chunk {
			d := newDesc(f, PortIngress)
			plain.w.hit.serial = 0 // no packet's: every packet looked up
			plain.w.Process(d)
			if b := batch[i]; d.Verdict != b.Verdict || d.Reason != b.Reason || d.Port != b.Port || !bytes.Equal(d.frame(), b.frame()) {
				t.Fatalf("frame %d: looked up %v/%v port %d, with the memo %v/%v port %d (bytes equal: %v)",
					start+i, d.Verdict, d.Reason, d.Port, b.Verdict, b.Reason, b.Port, bytes.Equal(d.frame(), b.frame()))
			}
		}
		plain.w.End(len(chunk))
		if !reflect.DeepEqual(plain.emit.frames, memo.emit.frames) {
			t.Fatalf("batch at %d: emitted frames differ", start)
		}
		// 300 ms a batch, and now and then 40 s: the flows of a run
		// that spans two batches may have expired in between.
		gap := int64(3e8)
		if start/64%10 == 9 {
			gap = 40e9
		}
		memo.now += gap
		plain.now += gap
	}
	a, b := plain.w.Counters(), memo.w.Counters()
	if !reflect.DeepEqual(a, b) {
		t.Errorf("counters differ:\nlooked up %+v\nmemo      %+v", a, b)
	}
	t.Logf("%d frames, %d runs of one flow; flows: %d hits, %d misses, %d repicked", len(frames), runs, b.FlowHits, b.FlowMisses, b.Repicked)
}

// TestLookupMemoExpiry: the entry a burst's packets took stops being
// taken when the clock moves: a flow idle past its timeout between two
// batches is a new flow again, as a lookup finds it expired, although
// the packets before were of the same flow and nothing else happened.
func TestLookupMemoExpiry(t *testing.T) {
	h := newHarness(t, testSpec())
	a := build(t, pk{src: client4, dst: vipUDP4, sport: 5000, dport: 7000, proto: layers.IPProtocolUDP, payload: []byte("x")})
	h.run(a, a) // a miss, then a hit
	h.now += int64(time.Hour)
	h.run(a)
	if c := h.w.Counters(); c.FlowMisses != 2 || c.FlowHits != 1 {
		t.Errorf("%d misses and %d hits, want 2 and 1: the flow expired between the batches", c.FlowMisses, c.FlowHits)
	}
}
