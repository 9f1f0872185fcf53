package quiclb

import (
	"bytes"
	"testing"
)

// testDecoder has one configuration per form, and none at rotation 4 or 5.
func testDecoder(t testing.TB) (*Decoder, map[uint8]*Codec) {
	t.Helper()
	cfgs := []Config{
		{Rotation: 0, ServerIDLen: 2, NonceLen: 4},               // plaintext, CID 7
		{Rotation: 1, ServerIDLen: 3, NonceLen: 4, Key: testKey}, // three-pass, CID 8
		{Rotation: 2, ServerIDLen: 8, NonceLen: 8, Key: testKey}, // single-pass, CID 17
		{Rotation: 3, ServerIDLen: 9, NonceLen: 6, Key: testKey}, // four-pass, CID 16
		{Rotation: 6, ServerIDLen: 15, NonceLen: 4},              // plaintext, CID 20
	}
	m := map[uint8]*Codec{}
	var list []*Codec
	for _, c := range cfgs {
		cd, err := NewCodec(c)
		if err != nil {
			t.Fatal(err)
		}
		m[c.Rotation] = cd
		list = append(list, cd)
	}
	d, err := NewDecoder(list...)
	if err != nil {
		t.Fatal(err)
	}
	return d, m
}

// testCID encodes a CID for codec c with server ID bytes 0xa0, 0xa1, ...
func testCID(t testing.TB, c *Codec) (cid, sid []byte) {
	t.Helper()
	cfg := c.Config()
	sid = make([]byte, cfg.ServerIDLen)
	for i := range sid {
		sid[i] = 0xa0 + byte(i)
	}
	nonce := bytes.Repeat([]byte{0x5c}, cfg.NonceLen)
	cid = make([]byte, cfg.CIDLen())
	var s Scratch
	if err := c.Encode(cid, sid, nonce, 0x15, &s); err != nil {
		t.Fatal(err)
	}
	return cid, sid
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func be32(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }

// long builds a long header: first octet, version, DCID, SCID, then body.
func long(first byte, version uint32, dcid, scid []byte, body ...byte) []byte {
	return cat([]byte{first}, be32(version), []byte{byte(len(dcid))}, dcid, []byte{byte(len(scid))}, scid, body)
}

func short(dcid []byte, body ...byte) []byte {
	return cat([]byte{0x40}, dcid, body)
}

const (
	v1Initial   = 0xc0 // long, fixed bit, type 0
	v1ZeroRTT   = 0xd0 // type 1
	v1Handshake = 0xe0 // type 2
	v1Retry     = 0xf0 // type 3
	v2Retry     = 0xc0 // type 0
	v2Initial   = 0xd0 // type 1
	v2ZeroRTT   = 0xe0 // type 2
	v2Handshake = 0xf0 // type 3
)

type routeCase struct {
	name    string
	pkt     []byte
	want    Verdict
	wantRot uint8
	wantSID []byte // for Routable
}

func checkRoute(t *testing.T, route func(p, sid []byte, s *Scratch) (uint8, int, Verdict), tests []routeCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s Scratch
			sid := bytes.Repeat([]byte{0xee}, MaxServerIDLen)
			rot, n, v := route(tc.pkt, sid, &s)
			if v != tc.want {
				t.Fatalf("verdict %v, want %v", v, tc.want)
			}
			if v != Routable {
				if n != 0 {
					t.Errorf("n = %d on %v", n, v)
				}
			} else if rot != tc.wantRot || !bytes.Equal(sid[:n], tc.wantSID) {
				t.Errorf("rot %d sid %x, want rot %d sid %x", rot, sid[:n], tc.wantRot, tc.wantSID)
			}
			if (v == FiveTuple || v == UnknownConfig) && rot != tc.wantRot {
				t.Errorf("rot %d, want %d", rot, tc.wantRot)
			}
		})
	}
}

func TestRoute(t *testing.T) {
	d, codecs := testDecoder(t)
	cid0, sid0 := testCID(t, codecs[0])
	cid1, sid1 := testCID(t, codecs[1])
	cid2, sid2 := testCID(t, codecs[2])
	cid3, sid3 := testCID(t, codecs[3])
	cid6, sid6 := testCID(t, codecs[6])
	unroutable := []byte{0xe5, 1, 2, 3, 4, 5, 6, 7}
	unknown := []byte{0x80, 1, 2, 3, 4, 5, 6, 7}  // rotation 4
	unknown5 := []byte{0xbf, 1, 2, 3, 4, 5, 6, 7} // rotation 5
	client := []byte{0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88}
	long20 := cat(cid1, bytes.Repeat([]byte{0x99}, 20-len(cid1)))

	checkRoute(t, d.Route, []routeCase{
		{"empty", nil, NotQUIC, 0, nil},
		{"short plaintext", short(cid0, 1, 2, 3), Routable, 0, sid0},
		{"short three-pass", short(cid1, 9, 9, 9, 9), Routable, 1, sid1},
		{"short single-pass", short(cid2), Routable, 2, sid2},
		{"short four-pass", short(cid3, 0), Routable, 3, sid3},
		{"short 20-octet CID", short(cid6), Routable, 6, sid6},
		{"short datagram cut in the CID", short(cid3)[:len(cid3)], ShortCID, 3, nil},
		{"short header alone", []byte{0x40}, ShortCID, 0, nil},
		{"short 0b111", short(unroutable, 1, 2), FiveTuple, 7, nil},
		{"short unknown config 4", short(unknown), UnknownConfig, 4, nil},
		{"short unknown config 5", short(unknown5), UnknownConfig, 5, nil},
		{"v1 Initial", long(v1Initial, 1, client, nil, 0, 0), ClientChosen, 0, nil},
		{"v1 Initial with a routable-looking DCID", long(v1Initial, 1, cid1, cid1), ClientChosen, 0, nil},
		{"v1 0-RTT", long(v1ZeroRTT, 1, cid1, client), ClientChosen, 0, nil},
		{"v1 Handshake", long(v1Handshake, 1, cid1, client, 1, 2, 3), Routable, 1, sid1},
		{"v1 Retry type routed by DCID", long(v1Retry, 1, cid3, nil), Routable, 3, sid3},
		{"v2 Initial", long(v2Initial, 0x6b3343cf, cid1, client), ClientChosen, 0, nil},
		{"v2 0-RTT", long(v2ZeroRTT, 0x6b3343cf, cid1, client), ClientChosen, 0, nil},
		{"v2 Handshake", long(v2Handshake, 0x6b3343cf, cid2, client), Routable, 2, sid2},
		{"v2 type 0 (Retry, v1's Initial) routed", long(v2Retry, 0x6b3343cf, cid0, client), Routable, 0, sid0},
		{"version negotiation", long(0x80, 0, client, cid1, 0, 0, 0, 1), NotQUIC, 0, nil},
		{"draft-29 Initial not decoded", long(0xc0, 0xff00001d, cid3, client), UnknownVersion, 0, nil},
		{"draft-29 Handshake not decoded", long(0xe0, 0xff00001d, cid3, client), UnknownVersion, 0, nil},
		{"unknown version type 1 not decoded", long(0xd0, 0x1a2a3a4a, cid0, client), UnknownVersion, 0, nil},
		{"long 0b111", long(v1Handshake, 1, unroutable, client), FiveTuple, 7, nil},
		{"long unknown config", long(v1Handshake, 1, unknown, client), UnknownConfig, 4, nil},
		{"long DCID longer than CIDLen", long(v1Handshake, 1, long20, client), Routable, 1, sid1},
		{"long DCID shorter than CIDLen", long(v1Handshake, 1, cid3[:len(cid3)-1], client), ShortCID, 3, nil},
		{"long zero-length DCID", long(v1Handshake, 1, nil, client), ShortCID, 0, nil},
		{"long header of 5 octets", []byte{0xe0, 0, 0, 0, 1}, NotQUIC, 0, nil},
		{"long header without DCID length", long(v1Handshake, 1, cid1, nil)[:5], NotQUIC, 0, nil},
		{"long header cut in the DCID", long(v1Handshake, 1, cid1, nil)[:6+len(cid1)-1], NotQUIC, 0, nil},
		{"long header ending at the DCID", long(v1Handshake, 1, cid1, nil)[:6+len(cid1)], Routable, 1, sid1},
		{"long DCID length 255 on a short datagram", cat([]byte{0xe0, 0, 0, 0, 1, 255}, cid1), NotQUIC, 0, nil},
	})
}

func TestRouteSource(t *testing.T) {
	d, codecs := testDecoder(t)
	cid1, sid1 := testCID(t, codecs[1])
	cid3, sid3 := testCID(t, codecs[3])
	client := []byte{0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88}
	unroutable := []byte{0xe5, 1, 2, 3, 4, 5, 6, 7}
	hs := long(v1Handshake, 1, client, cid3, 1, 2, 3, 4)
	scidAt := 6 + len(client) + 1

	checkRoute(t, d.RouteSource, []routeCase{
		{"empty", nil, NotQUIC, 0, nil},
		{"short header", short(cid1), NoSourceCID, 0, nil},
		{"server Initial v1", long(v1Initial, 1, client, cid1, 0, 0), Routable, 1, sid1},
		{"server Initial v2", long(v2Initial, 0x6b3343cf, client, cid3), Routable, 3, sid3},
		{"server Handshake", hs, Routable, 3, sid3},
		{"zero-length DCID", long(v1Handshake, 1, nil, cid1), Routable, 1, sid1},
		{"SCID longer than CIDLen", long(v1Handshake, 1, client, cat(cid1, []byte{7, 7, 7})), Routable, 1, sid1},
		{"cut after the SCID", hs[:scidAt+len(cid3)], Routable, 3, sid3},
		{"cut inside a long SCID but after CIDLen", long(v1Handshake, 1, client, cat(cid1, []byte{7, 7, 7}))[:scidAt+len(cid1)+1], Routable, 1, sid1},
		{"cut inside the SCID", hs[:scidAt+len(cid3)-1], ShortCID, 3, nil},
		{"cut after the SCID length", hs[:scidAt], ShortCID, 0, nil},
		{"cut before the SCID length", hs[:scidAt-1], NotQUIC, 0, nil},
		{"cut in the DCID", hs[:7], NotQUIC, 0, nil},
		{"cut in the version", hs[:3], NotQUIC, 0, nil},
		{"declared SCID shorter than CIDLen", long(v1Handshake, 1, client, cid3[:len(cid3)-2], 9, 9, 9, 9), ShortCID, 3, nil},
		{"zero-length SCID", long(v1Handshake, 1, client, nil, 1, 2, 3), ShortCID, 0, nil},
		{"SCID 0b111", long(v1Handshake, 1, client, unroutable), FiveTuple, 7, nil},
		{"SCID unknown config", long(v1Handshake, 1, client, []byte{0x9f, 1, 2, 3, 4, 5, 6, 7}), UnknownConfig, 4, nil},
		{"version negotiation", long(0x80, 0, client, cid1, 0, 0, 0, 1), NotQUIC, 0, nil},
	})
}

func TestRouteSIDBufferPrecondition(t *testing.T) {
	d, _ := testDecoder(t)
	var s Scratch
	for name, f := range map[string]func(p, sid []byte, s *Scratch) (uint8, int, Verdict){"Route": d.Route, "RouteSource": d.RouteSource} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s accepted a server ID buffer shorter than MaxServerIDLen", name)
				}
			}()
			f(nil, make([]byte, MaxServerIDLen-1), &s)
		}()
	}
}

func TestZeroAllocs(t *testing.T) {
	d, codecs := testDecoder(t)
	var s Scratch
	sid := make([]byte, MaxServerIDLen)
	for rot, c := range codecs {
		cid, _ := testCID(t, c)
		t.Run("ServerID/"+c.Form().String(), func(t *testing.T) {
			if a := testing.AllocsPerRun(100, func() { c.ServerID(sid, cid, &s) }); a != 0 {
				t.Errorf("rotation %d: %v allocs per ServerID", rot, a)
			}
		})
		pkt := short(cid, make([]byte, 40)...)
		hs := long(v1Handshake, 1, cid, cid, make([]byte, 40)...)
		t.Run("Route/"+c.Form().String(), func(t *testing.T) {
			if a := testing.AllocsPerRun(100, func() { d.Route(pkt, sid, &s) }); a != 0 {
				t.Errorf("rotation %d: %v allocs per Route", rot, a)
			}
			if a := testing.AllocsPerRun(100, func() { d.Route(hs, sid, &s) }); a != 0 {
				t.Errorf("rotation %d: %v allocs per Route (long)", rot, a)
			}
			if a := testing.AllocsPerRun(100, func() { d.RouteSource(hs, sid, &s) }); a != 0 {
				t.Errorf("rotation %d: %v allocs per RouteSource", rot, a)
			}
		})
		t.Run("Encode/"+c.Form().String(), func(t *testing.T) {
			cfg := c.Config()
			dst := make([]byte, cfg.CIDLen())
			id, nonce := make([]byte, cfg.ServerIDLen), make([]byte, cfg.NonceLen)
			if a := testing.AllocsPerRun(100, func() { _ = c.Encode(dst, id, nonce, 0, &s) }); a != 0 {
				t.Errorf("rotation %d: %v allocs per Encode", rot, a)
			}
		})
	}
}
