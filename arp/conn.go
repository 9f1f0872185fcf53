package arp

import (
	"fmt"

	"github.com/mdlayher/socket"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// frameConn carries whole Ethernet frames on one interface. The real one is
// an AF_PACKET socket; tests use an in-memory one.
//
// Close unblocks a ReadFrame in progress, which then returns an error; that is
// how readers are stopped. Writes may be made from any goroutine.
type frameConn interface {
	ReadFrame(b []byte) (int, error)
	WriteFrame(b []byte) error
	// JoinMulticast and LeaveMulticast make the interface accept frames to
	// a link-layer multicast address for as long as the conn is open.
	JoinMulticast(mac [6]byte) error
	LeaveMulticast(mac [6]byte) error
	Close() error
}

// listenFunc opens a frameConn on the interface with index ifindex that
// receives frames of one EtherType passing filter.
type listenFunc func(ifindex int, etherType uint16, filter []bpf.RawInstruction) (frameConn, error)

// packetConn is a frameConn on an AF_PACKET SOCK_RAW socket bound to one
// interface and EtherType.
type packetConn struct {
	c       *socket.Conn
	ifindex int
}

// listenPacket opens the socket in the calling thread's network namespace.
// The filter is attached before bind(2) so that no frame is queued unfiltered
// (the protocol is 0 until bind, so nothing is captured before it).
func listenPacket(ifindex int, etherType uint16, filter []bpf.RawInstruction) (frameConn, error) {
	c, err := socket.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0, "arp-packet", nil)
	if err != nil {
		return nil, err
	}
	if len(filter) > 0 {
		if err := c.SetBPF(filter); err != nil {
			c.Close()
			return nil, fmt.Errorf("attach filter: %w", err)
		}
	}
	if err := c.Bind(&unix.SockaddrLinklayer{Protocol: htons(etherType), Ifindex: ifindex}); err != nil {
		c.Close()
		return nil, fmt.Errorf("bind to ifindex %d: %w", ifindex, err)
	}
	return &packetConn{c: c, ifindex: ifindex}, nil
}

func (p *packetConn) ReadFrame(b []byte) (int, error) { return p.c.Read(b) }

// WriteFrame sends b as is; the socket is bound, so write(2) needs no address.
func (p *packetConn) WriteFrame(b []byte) error {
	_, err := p.c.Write(b)
	return err
}

func (p *packetConn) JoinMulticast(mac [6]byte) error {
	return p.membership(unix.PACKET_ADD_MEMBERSHIP, mac)
}

func (p *packetConn) LeaveMulticast(mac [6]byte) error {
	return p.membership(unix.PACKET_DROP_MEMBERSHIP, mac)
}

// membership adds or drops a PACKET_MR_MULTICAST membership. The kernel
// programs the address into the NIC's filter and removes it when the socket
// closes, so a crash leaves nothing behind.
func (p *packetConn) membership(op int, mac [6]byte) error {
	mreq := unix.PacketMreq{Ifindex: int32(p.ifindex), Type: unix.PACKET_MR_MULTICAST, Alen: 6}
	copy(mreq.Address[:], mac[:])
	return p.c.SetsockoptPacketMreq(unix.SOL_PACKET, op, &mreq)
}

func (p *packetConn) Close() error { return p.c.Close() }

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Classic BPF filters for the sockets. Offsets are from the start of the
// Ethernet header (SOCK_RAW). Every filter first drops frames the host sends
// (PACKET_OUTGOING) and unicast frames for other hosts (PACKET_OTHERHOST, seen
// in promiscuous mode): pkttype values 0..2 are host, broadcast, multicast.
const filterAccept = 0x40000 // snap length: whole frame

func incomingOnly() []bpf.Instruction {
	return []bpf.Instruction{
		bpf.LoadExtension{Num: bpf.ExtType},
		bpf.JumpIf{Cond: bpf.JumpGreaterThan, Val: unix.PACKET_MULTICAST, SkipTrue: 0xff},
	}
}

// assemble resolves the placeholder jump 0xff ("drop") to the final
// instruction and appends accept and drop.
func assemble(prog []bpf.Instruction) []bpf.RawInstruction {
	prog = append(prog, bpf.RetConstant{Val: filterAccept}, bpf.RetConstant{Val: 0})
	drop := len(prog) - 1
	for i, ins := range prog {
		if j, ok := ins.(bpf.JumpIf); ok {
			if j.SkipTrue == 0xff {
				j.SkipTrue = uint8(drop - i - 1)
			}
			if j.SkipFalse == 0xff {
				j.SkipFalse = uint8(drop - i - 1)
			}
			prog[i] = j
		}
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		panic("arp: bad BPF program: " + err.Error()) // the programs are constants
	}
	return raw
}

// arpFilter admits incoming ARP frames (the socket is bound to ETH_P_ARP).
func arpFilter() []bpf.RawInstruction { return assemble(incomingOnly()) }

// ndpFilter admits incoming IPv6 frames whose next header is ICMPv6 and
// whose ICMPv6 type is icmpType. NDP messages carry no extension headers in
// practice; one that does is not seen, which costs a retry at worst.
func ndpFilter(icmpType uint8) []bpf.RawInstruction {
	return assemble(append(incomingOnly(),
		bpf.LoadAbsolute{Off: ethHeaderLen + ipv6NextHeader, Size: 1},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: protocolICMPv6, SkipTrue: 0xff},
		bpf.LoadAbsolute{Off: ethHeaderLen + ipv6HeaderLen, Size: 1},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: uint32(icmpType), SkipTrue: 0xff},
	))
}
