package control

import (
	"testing"

	"github.com/vipd/vipd/dataplane"
)

const quicVIP = `
[dataplane]
ingress = "eth0"
egress = "eth1"

[[vip]]
name = "q"
address = "198.18.0.104"
port = 443
protocol = "udp"

[vip.quic_lb]
[[vip.quic_lb.config]]
rotation = 0
server_id_len = 2
nonce_len = 6
[[vip.quic_lb.config]]
rotation = 2
server_id_len = 3
nonce_len = 5

[[vip.backend]]
address = "198.18.1.11"
port = 4433
quic_lb_server_ids = { 2 = "0b0b01", 0 = "0a01" }

[[vip.backend]]
address = "198.18.1.12"
port = 4433
`

// TestCompileQUIC: a QUIC-LB VIP's configurations and server IDs reach the
// spec (the IDs by ref, in codepoint order), the spec builds, a
// configuration keeps its QUICSpec from one compile to the next (every
// snapshot shares it), and enabled = false leaves it out.
func TestCompileQUIC(t *testing.T) {
	cfg := load(t, quicVIP)
	reg := NewRegistry()
	plan, err := NewPlan(cfg, reg)
	if err != nil {
		t.Fatal(err)
	}
	host := testHost()
	vs, _, err := plan.VIP(0, host, func(uint32) Status { return Status{} })
	if err != nil {
		t.Fatal(err)
	}
	q := vs.QUIC
	if q == nil || q.Decoder == nil {
		t.Fatalf("no QUIC-LB in the spec: %+v", vs)
	}
	for _, rot := range []uint8{0, 2} {
		if q.Decoder.Codec(rot) == nil {
			t.Errorf("configuration %d missing", rot)
		}
	}
	want := []dataplane.QUICServer{
		{Ref: vs.Backends[0].Ref, Rotation: 0, ID: "\x0a\x01"},
		{Ref: vs.Backends[0].Ref, Rotation: 2, ID: "\x0b\x0b\x01"},
	}
	if len(q.Servers) != len(want) || q.Servers[0] != want[0] || q.Servers[1] != want[1] {
		t.Errorf("servers %+v, want %+v", q.Servers, want)
	}
	vs2, _, err := plan.VIP(0, host, func(uint32) Status { return Status{} })
	if err != nil || vs2.QUIC != q {
		t.Errorf("a second compile of the same configuration made a new QUICSpec (%v)", err)
	}
	spec := plan.Header(host)
	spec.VIPs = []dataplane.VIPSpec{vs}
	if _, err := dataplane.NewSnapshot(spec); err != nil {
		t.Fatalf("the compiled spec does not build: %v", err)
	}

	off := load(t, quicVIP+"")
	off.VIPs[0].QUICLB.Enabled = false
	plan, err = NewPlan(off, reg)
	if err != nil {
		t.Fatal(err)
	}
	vs, _, err = plan.VIP(0, host, func(uint32) Status { return Status{} })
	if err != nil || vs.QUIC != nil {
		t.Errorf("enabled = false: QUIC %v, err %v", vs.QUIC, err)
	}
}
