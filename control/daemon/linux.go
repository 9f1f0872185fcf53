package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"

	"github.com/vipd/vipd/arp"
	"github.com/vipd/vipd/control"
	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/dataplane"
	"github.com/vipd/vipd/dataplane/afpacket"
	"github.com/vipd/vipd/dataplane/afxdp"
	"github.com/vipd/vipd/dataplane/xdpprog"
	"github.com/vipd/vipd/internal/linkwatch"
	"github.com/vipd/vipd/internal/offload"
)

// LinuxPlatform is the real Platform: AF_XDP (with vipd's XDP steering
// program) or AF_PACKET queues, ARP/NDP for the VIPs, next-hop resolution
// and interface watching through rtnetlink.
type LinuxPlatform struct {
	log  *slog.Logger
	cfg  *config.Config // as at start; the dataplane part never changes
	proc string         // /proc, for the AF_PACKET host check

	mu     sync.Mutex
	links  [2]linkwatch.Link // by port; the same link twice when one-armed
	onLink []netip.Prefix
	local  []netip.Addr       // every address of the box, as of the last Host
	progs  []*xdpprog.Program // one per interface (each has its own XSKMAP)
	// fast is the ingress program's fast path ([dataplane] fast_path),
	// nil when off; fastWriters are the workers' ways into it, by queue.
	fast        *xdpprog.Fast
	fastWriters []*xdpprog.FlowWriter
	xdpQs       []*afxdp.Queue
	pktQs       []*afpacket.Queue
	resp        *arp.Responder
	res         *arp.Resolver
	// frames is the driver's frame layout: checkMTU checks each
	// interface's MTU against it, at start and on a change.
	frames Frames
}

// NewLinuxPlatform returns the platform for cfg.
func NewLinuxPlatform(cfg *config.Config, log *slog.Logger) *LinuxPlatform {
	return &LinuxPlatform{log: log, cfg: cfg, proc: "/proc", res: arp.NewResolver(log, arp.DefaultRefresh)}
}

func (p *LinuxPlatform) names() []string {
	dp := &p.cfg.Dataplane
	if dp.TwoArmed() {
		return []string{dp.Ingress, dp.Egress}
	}
	return []string{dp.Ingress}
}

// OpenQueues implements Platform.
func (p *LinuxPlatform) OpenQueues(dp *config.Dataplane) ([]dataplane.Queue, error) {
	in, err := linkwatch.Read(dp.Ingress)
	if err != nil {
		return nil, fmt.Errorf("ingress interface %q: %w", dp.Ingress, err)
	}
	eg := in
	if dp.TwoArmed() {
		if eg, err = linkwatch.Read(dp.Egress); err != nil {
			return nil, fmt.Errorf("egress interface %q: %w", dp.Egress, err)
		}
	}
	p.links = [2]linkwatch.Link{in, eg}
	if p.onLink, err = arp.OnLinkPrefixes(dp.Ingress); err != nil {
		return nil, fmt.Errorf("routes of %q: %w", dp.Ingress, err)
	}
	p.checkOffload()
	ifi, err := net.InterfaceByIndex(in.Index)
	if err != nil {
		return nil, err
	}
	if p.resp, err = arp.NewResponder(ifi, p.log); err != nil {
		return nil, fmt.Errorf("ARP responder on %s: %w", dp.Ingress, err)
	}
	switch dp.IO {
	case config.IOAFPacket:
		return p.openAFPacket(dp)
	default:
		return p.openAFXDP(dp)
	}
}

// frameSize returns the frame size the driver opens with (FramesFor the
// interfaces' MTUs), keeps the layout for checkMTU and warns of every
// interface whose MTU is over.
func (p *LinuxPlatform) frameSize(dp *config.Dataplane) int {
	p.frames = FramesFor(dp, p.links[0].MTU, p.links[1].MTU)
	p.log.Info("frame size", "bytes", p.frames.Size, "chosen", p.frames.Chosen, "longest_frame", p.frames.Longest)
	p.checkMTU(p.links[0])
	if p.links[1].Index != p.links[0].Index {
		p.checkMTU(p.links[1])
	}
	return p.frames.Size
}

// checkMTU warns when frames of l's MTU do not fit the driver's frames:
// the kernel drops (AF_XDP) or cuts (AF_PACKET, then vipd drops) them.
func (p *LinuxPlatform) checkMTU(l linkwatch.Link) {
	if !p.frames.Fits(l.MTU) {
		p.log.Warn("interface MTU over what a frame holds: longer frames are dropped and counted (driver events xsk_rx_dropped or rx_truncated); set [dataplane] frame_size = 4096 or lower the MTU",
			"interface", l.Name, "mtu", l.MTU, "frame_size", p.frames.Size, "longest_frame", p.frames.Longest)
	}
}

func (p *LinuxPlatform) openAFXDP(dp *config.Dataplane) ([]dataplane.Queue, error) {
	mode := map[config.XDPMode]xdpprog.Mode{config.XDPAuto: xdpprog.Auto, config.XDPNative: xdpprog.Native, config.XDPGeneric: xdpprog.Generic}[dp.XDPMode]
	opts := afxdp.Options{
		FrameSize: p.frameSize(dp), FrameCount: dp.FrameCount,
		RxRing: dp.RxRingSize, TxRing: dp.TxRingSize, FillRing: dp.FillRingSize, CompletionRing: dp.CompletionRingSize,
		TxBudget:      max(dp.BatchSize, 64),
		BusyPollUsecs: dp.BusyPollUsecs, BusyPollBudget: dp.BusyPollBatch(),
	}
	links := []linkwatch.Link{p.links[0]}
	if dp.TwoArmed() {
		links = append(links, p.links[1])
	}
	var fl []fastLink
	for _, l := range links {
		fl = append(fl, fastLink{link: l})
		if dp.FastPath == config.FastPathAuto { // the only mode that asks
			fl[len(fl)-1].features, fl[len(fl)-1].err = xdpprog.InterfaceFeatures(l.Index)
		}
	}
	fast, why := fastPathRuns(dp, &p.cfg.Conntrack, fl)
	if !fast && dp.FastPath != config.FastPathOff {
		p.log.Info("XDP fast path off", "fast_path", string(dp.FastPath), "why", why)
	}
	socks := make([][]*afxdp.Socket, len(links))
	for li, l := range links {
		var o xdpprog.Options
		if fast {
			// Clients' packets arrive on the ingress interface, NAT
			// backends' replies on the egress one (two-armed): one map
			// of flows for both programs, each entry for its interface.
			o.FastFlows, o.FastFlows6, o.ShareFast = dp.FastPathFlows, dp.FastPathFlows6, p.fast
		}
		prog, err := xdpprog.LoadWith(dp.Queues, o)
		if err != nil {
			return nil, fmt.Errorf("XDP program: %w", err)
		}
		p.progs = append(p.progs, prog)
		if f := prog.Fast(); f != nil && p.fast == nil {
			p.fast = f
			ifindex := [2]uint32{uint32(p.links[0].Index), uint32(p.links[1].Index)}
			for range dp.Queues {
				// Two flows per frame of a batch: a batch offers at most
				// one per frame, and a relayed frame or two besides.
				w, err := f.NewFlowWriter(2*dp.BatchSize, dp.FastPathRefresh.D(), ifindex)
				if err != nil {
					return nil, fmt.Errorf("XDP fast path: %w", err)
				}
				p.fastWriters = append(p.fastWriters, w)
			}
		}
		if prog.Fast() != nil {
			p.log.Info("XDP fast path on", "interface", l.Name, "flows", dp.FastPathFlows, "flows6", dp.FastPathFlows6, "refresh", dp.FastPathRefresh.D().String())
		}
		for q := 0; q < dp.Queues; q++ {
			s, err := afxdp.Open(l.Index, q, opts)
			if err != nil {
				return nil, fmt.Errorf("%s queue %d: %w (does the interface have %d queues? see ethtool -l)", l.Name, q, err, dp.Queues)
			}
			socks[li] = append(socks[li], s)
			if on, err := s.BusyPoll(); dp.BusyPollUsecs > 0 && !on {
				// Not fatal: the socket works as it would with
				// busy_poll_usecs = 0.
				p.log.Warn("busy polling refused by the kernel; this queue runs without it (vipd needs CAP_NET_ADMIN for it; Linux 5.11+)",
					"interface", l.Name, "queue", q, "err", err)
			}
			if err := prog.Register(q, s.FD()); err != nil {
				return nil, err
			}
		}
		got, err := prog.Attach(l.Index, mode)
		if err != nil {
			return nil, fmt.Errorf("attach XDP to %s: %w", l.Name, err)
		}
		p.log.Info("XDP steering program attached", "interface", l.Name, "mode", got.String(), "queues", dp.Queues)
	}
	var qs []dataplane.Queue
	for q := 0; q < dp.Queues; q++ {
		var eg *afxdp.Socket
		if dp.TwoArmed() {
			eg = socks[1][q]
		}
		xq := afxdp.NewQueue(socks[0][q], eg, dp.BatchSize)
		p.xdpQs = append(p.xdpQs, xq)
		qs = append(qs, xq)
	}
	return qs, nil
}

// FastPath implements fastPlatform.
func (p *LinuxPlatform) FastPath(queue int) dataplane.FastPath {
	if queue < 0 || queue >= len(p.fastWriters) {
		return nil
	}
	return p.fastWriters[queue]
}

// SetFastGeneration implements fastPlatform.
func (p *LinuxPlatform) SetFastGeneration(gen uint32) error {
	if p.fast == nil {
		return nil
	}
	return p.fast.SetGeneration(gen)
}

// CheckReload implements reloadChecker: with AF_PACKET the host check
// that start runs (afpacket.CheckHost) runs again for the new VIPs, since
// a reload may bring the first IPv6 VIP, whose traffic the kernel would
// forward a second time with IPv6 forwarding on.
func (p *LinuxPlatform) CheckReload(cfg *config.Config) error {
	if p.cfg.Dataplane.IO != config.IOAFPacket {
		return nil
	}
	var vips []netip.Addr
	for _, v := range cfg.VIPs {
		vips = append(vips, v.Address)
	}
	return afpacket.CheckHost(p.proc, vips)
}

func (p *LinuxPlatform) openAFPacket(dp *config.Dataplane) ([]dataplane.Queue, error) {
	var vips []netip.Addr
	for _, v := range p.cfg.VIPs {
		vips = append(vips, v.Address)
	}
	if err := afpacket.CheckHost(p.proc, vips); err != nil {
		return nil, err
	}
	o := afpacket.Options{FrameSize: p.frameSize(dp), RxFrames: dp.RxRingSize, TxFrames: dp.TxRingSize}
	if dp.Queues > 1 {
		// One fanout group per interface and process.
		o.Fanout = uint16(os.Getpid())
	}
	var qs []dataplane.Queue
	for q := 0; q < dp.Queues; q++ {
		in, err := afpacket.OpenPort(p.links[0].Index, o)
		if err != nil {
			return nil, err
		}
		var eg *afpacket.Port
		if dp.TwoArmed() {
			oe := o
			if oe.Fanout != 0 {
				oe.Fanout++
			}
			if eg, err = afpacket.OpenPort(p.links[1].Index, oe); err != nil {
				in.Close()
				return nil, err
			}
		}
		pq := afpacket.NewQueue(in, eg, dp.BatchSize)
		p.pktQs = append(p.pktQs, pq)
		qs = append(qs, pq)
	}
	p.log.Info("AF_PACKET queues open", "workers", dp.Queues)
	return qs, nil
}

// checkOffload warns about each of vipd's interfaces that is a veth whose
// peer has TX checksum offload on: what that peer sends reaches vipd with
// partial checksums, which NAT would forward unfinished (docs/operations.md, "Host
// preparation"). It only logs: traffic from elsewhere is not affected, and
// the sampled checksum counters show whether it happens.
//
// vipd -check-host prints the same findings (offload.CheckInterfaces).
func (p *LinuxPlatform) checkOffload() {
	for _, f := range offload.CheckInterfaces(p.names()) {
		if f.Fix != "" {
			p.log.Warn(f.Warning, "interface", f.Interface, "fix", f.Fix)
		} else {
			p.log.Warn(f.Warning, "interface", f.Interface)
		}
	}
}

// Host implements Platform.
func (p *LinuxPlatform) Host() control.Host {
	p.mu.Lock()
	defer p.mu.Unlock()
	// The box's own addresses, read afresh (one netlink dump): an address
	// added to any interface must stop being treated as a NAT client at
	// the next snapshot.
	if local, err := linkwatch.LocalAddrs(); err == nil {
		p.local = local
	} else {
		p.log.Warn("reading the box's addresses failed; keeping the last ones", "err", err)
	}
	h := control.Host{Host: dataplane.Host{ClientOnLink: p.onLink, Local: p.local}, NextHop: p.res.Lookup}
	for port, l := range p.links {
		h.MAC[port] = l.MAC
		h.MTU[port] = l.MTU
		for _, a := range l.Addrs {
			switch {
			case a.Addr().Is4() && !h.Addr4[port].IsValid():
				h.Addr4[port] = a.Addr()
			case a.Addr().Is6() && !a.Addr().IsLinkLocalUnicast() && !h.Addr6[port].IsValid():
				h.Addr6[port] = a.Addr()
			}
		}
	}
	// NAT replies to clients off the ingress subnets go to the default
	// gateway, when that gateway is on the ingress side.
	if mac, ifindex, ok := p.res.Gateway(false); ok && ifindex == p.links[0].Index {
		h.ClientGateway4 = mac
	}
	if mac, ifindex, ok := p.res.Gateway(true); ok && ifindex == p.links[0].Index {
		h.ClientGateway6 = mac
	}
	return h
}

// Apply implements Platform.
func (p *LinuxPlatform) Apply(s Steering) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	replies := make([]xdpprog.ReplyKey, len(s.Replies))
	for i, r := range s.Replies {
		replies[i] = xdpprog.ReplyKey{Addr: r.Addr, Proto: r.Proto, Port: r.Port}
	}
	for _, prog := range p.progs {
		if err := prog.Update(s.VIPs, replies, s.Local); err != nil {
			return err
		}
	}
	p.res.SetTargets(s.NextHops)
	return nil
}

// SetNeighborVIPs implements Platform.
func (p *LinuxPlatform) SetNeighborVIPs(addrs []netip.Addr) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.resp != nil {
		p.resp.SetVIPs(addrs)
	}
}

// Run implements Platform.
func (p *LinuxPlatform) Run(ctx context.Context, changed func()) error {
	errc := make(chan error, 3)
	go func() { errc <- p.resp.Run(ctx) }()
	go func() { errc <- p.res.Run(ctx, changed) }()
	go func() {
		errc <- linkwatch.Watch(ctx, p.names(), func(l linkwatch.Link) {
			p.mu.Lock()
			from := -1 // the MTU before, if it changed (once: a one-armed box has its link twice)
			if p.links[0].Index == l.Index && p.links[0].MAC != l.MAC && l.MAC != ([6]byte{}) && p.resp != nil {
				p.resp.SetMAC(l.MAC) // the ingress: the ARP/NDP responder answers with its MAC
			}
			for port := range p.links {
				if p.links[port].Index == l.Index {
					if p.links[port].MTU != l.MTU {
						from = p.links[port].MTU
					}
					p.links[port] = l
				}
			}
			if from >= 0 {
				p.log.Info("interface MTU changed", "interface", l.Name, "from", from, "to", l.MTU)
				p.checkMTU(l)
			}
			p.mu.Unlock()
			changed()
		})
	}()
	var first error
	for i := 0; i < 3; i++ {
		if err := <-errc; err != nil && ctx.Err() == nil && first == nil {
			first = err
			return first
		}
	}
	return first
}

// DriverStats implements Platform.
func (p *LinuxPlatform) DriverStats() map[string]uint64 {
	m := map[string]uint64{}
	for _, q := range p.xdpQs {
		s := q.Stats()
		m["tx_ring_full"] += s.TxRingFull
		m["no_free_frame"] += s.NoFrame
		m["tx_too_long"] += s.TooLong
		m["kernel_verdict_dropped"] += s.KernelDropped
		m["fill_ring_starved"] += s.FillStarved
		m["tx_kicks"] += s.Kicks
		m["tx_kick_errors"] += s.KickErrors
		m["rx_wakeups"] += s.Wakeups
		m["xsk_rx_dropped"] += s.RxDropped
		m["xsk_rx_ring_full"] += s.RxRingFull
		m["xsk_fill_ring_empty"] += s.RxFillRingEmpty
		m["xsk_tx_ring_empty"] += s.TxRingEmpty
		m["xsk_invalid_descs"] += s.RxInvalid + s.TxInvalid
	}
	if p.fast != nil {
		if st, err := p.fast.Stats(); err == nil {
			m["fast_path_forwarded"] = st.Packets
			m["fast_path_bytes"] = st.Bytes
		}
	}
	for _, q := range p.pktQs {
		s := q.Stats()
		m["tx_ring_full"] += s.TxRingFull
		m["tx_errors"] += s.TxErrors
		m["rx_truncated"] += s.Truncated
		m["rx_ring_dropped"] += s.RxDropped
		m["rx_socket_errors"] += s.SocketErrors
	}
	if p.resp != nil {
		st := p.resp.Stats()
		m["arp_requests"] = st.Requests
		m["arp_replies"] = st.Replies
		m["arp_announcements"] = st.Announcements
		m["arp_conflicts"] = st.Conflicts
		m["arp_send_errors"] = st.SendErrors
	}
	return m
}

// Close implements Platform: it detaches the XDP programs and frees their
// maps, so nothing of vipd stays in the kernel.
func (p *LinuxPlatform) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, prog := range p.progs {
		if err := prog.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	p.progs = nil
	return errors.Join(errs...)
}
