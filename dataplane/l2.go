package dataplane

import (
	"encoding/binary"

	"github.com/vipd/vipd/packet"
)

// l2 is what the pipeline keeps of a received Ethernet header before it may
// overwrite it: the sender's MAC (the way back) and the VLAN tag.
type l2 struct {
	hlen int // 14, or 18 with a tag
	src  [6]byte
	tci  uint16
	vlan bool
}

func readL2(frame []byte, f *packet.Frame) l2 {
	e := l2{hlen: f.L3Off, vlan: f.VLAN, src: [6]byte(frame[6:12])}
	if f.VLAN {
		e.tci = binary.BigEndian.Uint16(frame[14:])
	}
	return e
}

// write puts an Ethernet header (with the same VLAN tag as the received
// frame) at the start of b.
func (e *l2) write(b []byte, dst, src [6]byte, etherType uint16) {
	copy(b[0:6], dst[:])
	copy(b[6:12], src[:])
	if e.vlan {
		binary.BigEndian.PutUint16(b[12:], packet.EtherTypeVLAN)
		binary.BigEndian.PutUint16(b[14:], e.tci)
		binary.BigEndian.PutUint16(b[16:], etherType)
		return
	}
	binary.BigEndian.PutUint16(b[12:], etherType)
}

// setMACs rewrites the addresses of the frame's own Ethernet header. The
// array conversion is its one bounds check.
func setMACs(frame []byte, dst, src [6]byte) {
	h := (*[12]byte)(frame)
	*(*[6]byte)(h[0:6]) = dst
	*(*[6]byte)(h[6:12]) = src
}

// setBackendMACs is setMACs for a frame to backend b from the egress port.
func setBackendMACs(frame []byte, b *backend) { *(*[12]byte)(frame) = b.macs }
