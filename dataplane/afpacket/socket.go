package afpacket

import (
	"fmt"

	"github.com/vipd/vipd/dataplane"
	"github.com/vipd/vipd/packet"
	"golang.org/x/sys/unix"
)

// Options size one interface's rings for one worker.
type Options struct {
	FrameSize int // ring frame size: 2048 or 4096
	RxFrames  int // receive ring frames
	TxFrames  int // transmit ring frames
	// Fanout is the PACKET_FANOUT group id shared by the workers of one
	// interface; 0 means no fanout (a single worker).
	Fanout uint16
}

// reserve is PACKET_RESERVE: headroom in front of each received frame, for
// the pipeline plus a VLAN tag put back.
const reserve = dataplane.Headroom + 4

// macOffset is where TPACKET_V2 puts a received Ethernet frame in its ring
// frame (tpacket_rcv, net/packet/af_packet.c): the header, TPACKET2_HDRLEN
// (the 32-byte tpacket2_hdr and a 20-byte sockaddr_ll), plus 16 bytes for
// the link header, aligned to 16 (TPACKET_ALIGN), plus the reserve, less
// the 14-byte Ethernet header that precedes the network header there.
const macOffset = (32+20+16+15)&^15 + reserve - packet.EthernetSize

// MaxFrame returns the longest Ethernet frame (headers included; the
// kernel strips a VLAN tag, which the driver puts back in the reserve)
// that a ring of frameSize-byte frames receives whole: the kernel cuts a
// longer one, which the driver drops and counts (Stats.Truncated,
// vipd_driver_events_total{event="rx_truncated"}).
func MaxFrame(frameSize int) int { return frameSize - macOffset }

// FrameOverhead is what a received frame adds to its MTU-sized packet
// here: the Ethernet header (the kernel strips a VLAN tag).
const FrameOverhead = packet.EthernetSize

// Port is one interface as one worker sees it: a receive socket with its
// ring, and a transmit socket with its ring.
type Port struct {
	ifindex int
	rxfd    int
	txfd    int
	rx, tx  ring
}

// OpenPort opens the sockets and rings of one worker on one interface.
func OpenPort(ifindex int, o Options) (*Port, error) {
	p := &Port{ifindex: ifindex, rxfd: -1, txfd: -1}
	if err := p.open(o); err != nil {
		p.Close()
		return nil, fmt.Errorf("afpacket: ifindex %d: %w", ifindex, err)
	}
	return p, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func (p *Port) open(o Options) error {
	var err error
	// Receive: every protocol, outgoing frames ignored (not even our own).
	if p.rxfd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL))); err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	if err := unix.SetsockoptInt(p.rxfd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V2); err != nil {
		return fmt.Errorf("TPACKET_V2: %w", err)
	}
	if err := unix.SetsockoptInt(p.rxfd, unix.SOL_PACKET, unix.PACKET_RESERVE, reserve); err != nil {
		return fmt.Errorf("PACKET_RESERVE: %w", err)
	}
	if err := unix.SetsockoptInt(p.rxfd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
		return fmt.Errorf("PACKET_IGNORE_OUTGOING: %w", err)
	}
	if p.rx, err = setupRing(p.rxfd, unix.PACKET_RX_RING, o.FrameSize, o.RxFrames); err != nil {
		return err
	}
	if err := unix.Bind(p.rxfd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: p.ifindex}); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	if o.Fanout != 0 {
		arg := int(o.Fanout) | unix.PACKET_FANOUT_HASH<<16
		if err := unix.SetsockoptInt(p.rxfd, unix.SOL_PACKET, unix.PACKET_FANOUT, arg); err != nil {
			return fmt.Errorf("PACKET_FANOUT: %w", err)
		}
	}
	// Transmit: protocol 0 receives nothing; qdisc bypass as a forwarder
	// has its own queueing (the rings).
	if p.txfd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0); err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	if err := unix.SetsockoptInt(p.txfd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V2); err != nil {
		return fmt.Errorf("TPACKET_V2: %w", err)
	}
	unix.SetsockoptInt(p.txfd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1)
	if p.tx, err = setupRing(p.txfd, unix.PACKET_TX_RING, o.FrameSize, o.TxFrames); err != nil {
		return err
	}
	if err := unix.Bind(p.txfd, &unix.SockaddrLinklayer{Ifindex: p.ifindex}); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	return nil
}

// Close releases the port's sockets and rings.
func (p *Port) Close() error {
	p.rx.unmap()
	p.tx.unmap()
	for _, fd := range []*int{&p.rxfd, &p.txfd} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
	return nil
}

// Drops returns the kernel's count of frames lost because the receive
// ring was full (PACKET_STATISTICS; reading it resets the kernel counter,
// so the caller accumulates).
func (p *Port) Drops() (uint64, error) {
	st, err := unix.GetsockoptTpacketStats(p.rxfd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if err != nil {
		return 0, err
	}
	return uint64(st.Drops), nil
}
