package dataplane

import (
	"net/netip"
	"testing"

	"github.com/google/gopacket/layers"

	"github.com/vipd/vipd/conntrack"
)

// TestInOutCounters: each backend counts its clients' packets and bytes
// in and, in NAT mode, its replies out; a VIP's counts are the sums of
// its backends'; a DSR backend's out counts stay 0 (vipd never sees its
// replies).
func TestInOutCounters(t *testing.T) {
	h := newHarness(t, testSpec())
	type sent struct{ in, inBytes, out, outBytes uint64 }
	want := map[uint32]*sent{}
	at := func(ref uint32) *sent {
		if want[ref] == nil {
			want[ref] = &sent{}
		}
		return want[ref]
	}
	for i := range 40 {
		sport := uint16(2000 + i)
		for _, c := range []struct {
			vip   netip.Addr
			port  uint16
			proto layers.IPProtocol
		}{{vipNAT4, 80, layers.IPProtocolTCP}, {vipDSR4, 80, layers.IPProtocolTCP}, {vipUDP4, 7000, layers.IPProtocolUDP}, {vipNAT6, 80, layers.IPProtocolTCP}} {
			client := client4
			if c.vip.Is6() {
				client = client6
			}
			flags := "S"
			if c.proto == layers.IPProtocolUDP {
				flags = ""
			}
			frame := build(t, pk{src: client, dst: c.vip, sport: sport, dport: c.port, proto: c.proto, flags: flags, payload: payloadOf(i)})
			n := uint64(ipLen(frame[14:]))
			d := h.run(frame)[0]
			if d.Verdict != VerdictTX {
				t.Fatalf("%v: %v %v", c.vip, d.Verdict, d.Reason)
			}
			ref := h.refOf(t, c.vip, client, sport)
			at(ref).in++
			at(ref).inBytes += n
			be := natDest(t, d.frame())
			if !be.IsValid() {
				continue // DSR: no replies through vipd
			}
			// The backend answers, one packet or three.
			for range 1 + i%3 {
				rflags := "A"
				if c.proto == layers.IPProtocolUDP {
					rflags = ""
				}
				reply := build(t, pk{src: be.Addr(), dst: client, sport: be.Port(), dport: sport, proto: c.proto, flags: rflags, payload: payloadOf(2 * i), srcMAC: macOf(1)})
				if d := h.runOn(PortEgress, reply); d.Verdict != VerdictTX {
					t.Fatalf("reply from %v: %v %v", be, d.Verdict, d.Reason)
				}
				at(ref).out++
				at(ref).outBytes += uint64(ipLen(reply[14:]))
			}
		}
	}
	cs := h.w.Counters()
	vips := map[int32]FlowCounters{}
	for ref, c := range cs.Backends {
		w := at(uint32(ref))
		if c.Packets != w.in || c.Bytes != w.inBytes || c.OutPackets != w.out || c.OutBytes != w.outBytes {
			t.Errorf("backend %d: in %d/%d B, out %d/%d B; want %+v", ref, c.Packets, c.Bytes, c.OutPackets, c.OutBytes, *w)
		}
		b := &h.snap.backends[ref]
		if !b.live {
			continue
		}
		if h.snap.vips[b.vip].mode == ModeDSR && c.OutPackets != 0 {
			t.Errorf("DSR backend %d counted replies", ref)
		}
		v := vips[b.vip]
		v.Packets += c.Packets
		v.Bytes += c.Bytes
		v.OutPackets += c.OutPackets
		v.OutBytes += c.OutBytes
		vips[b.vip] = v
	}
	for vi, sum := range vips {
		c := cs.VIPs[h.snap.vips[vi].id]
		if c.Packets != sum.Packets || c.Bytes != sum.Bytes || c.OutPackets != sum.OutPackets || c.OutBytes != sum.OutBytes {
			t.Errorf("VIP %s: %+v, its backends' sum %+v", h.snap.vips[vi].name, c, sum)
		}
	}
	if cs.Replies == 0 {
		t.Error("no replies counted")
	}
}

// refOf is the backend ref the flow of client:sport to vip is pinned to.
func (h *harness) refOf(t *testing.T, vip, client netip.Addr, sport uint16) uint32 {
	t.Helper()
	var found uint32
	ok := false
	h.w.ct.ForEach(func(e conntrack.Entry) bool {
		k := e.Key()
		v := &h.snap.vips[h.snap.byID[k.VIP]]
		if k.SrcAddr() == client && k.SrcPort == sport && (vip.Is4() && !v.v6 && v.addr4 == vip.As4() || vip.Is6() && v.v6 && v.addr6 == vip.As16()) {
			found, ok = e.Backend(), true
			return false
		}
		return true
	})
	if !ok {
		t.Fatalf("no flow %v:%d -> %v", client, sport, vip)
	}
	return found
}
