package xdpprog

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// Mode is how the program is attached to an interface.
type Mode int

const (
	// Auto attaches in native mode and falls back to generic mode when the
	// driver refuses (no XDP support, or an MTU too large for XDP without
	// multi-buffer support, which this program does not declare). Why
	// native mode failed is not reported; ask for Native to see it.
	Auto Mode = iota
	// Native runs the program in the driver, before any socket buffer
	// exists (XDP_FLAGS_DRV_MODE).
	Native
	// Generic runs the program on socket buffers in the core receive path
	// (XDP_FLAGS_SKB_MODE): it works with every driver, slower.
	Generic
)

func (m Mode) String() string {
	switch m {
	case Auto:
		return "auto"
	case Native:
		return "native"
	case Generic:
		return "generic"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ReplyKey names a NAT backend's reply source: packets from (Addr, Proto,
// Port) are NAT replies. Port 0 means any port (the backends of every-port
// VIPs). Proto is 6 (TCP) or 17 (UDP). An IPv4-mapped IPv6 Addr is taken
// as the IPv4 address.
type ReplyKey struct {
	Addr  netip.Addr
	Proto uint8
	Port  uint16
}

// ErrCapacity is returned (wrapped) by Update when a set exceeds its map.
var ErrCapacity = errors.New("xdpprog: steering map capacity exceeded")

// errRejected is wrapped by Load's error when the verifier refuses the
// program: a bug here, never a matter of privilege.
var errRejected = errors.New("the verifier rejected the program")

// maxQueues bounds the XSKMAP; no NIC has more receive queues.
const maxQueues = 1 << 16

// Program is the loaded steering program, its maps and the interfaces it
// is attached to. Its methods may be called from several goroutines. After
// Close, every method returns an error wrapping net.ErrClosed.
type Program struct {
	mu     sync.Mutex
	closed bool
	queues int
	prog   *ebpf.Program
	xsks   *ebpf.Map
	maps   []*ebpf.Map // every map, for Close
	vips   set[addrKey]
	local  set[addrKey]
	reply  set[replyKey]
	hosts  set[replyKey]
	links  map[int]link.Link // by ifindex
	fast   *Fast             // nil without the fast path
}

// Options are what Load may add to the program.
type Options struct {
	// FastFlows is the number of flows the fast path's flow map holds
	// (least recently used ones make room for new ones); 0 builds the
	// program without the fast path.
	FastFlows int
	// FastFlows6, with FastFlows, is the number of IPv6 flows (its own
	// map); 0 builds the fast path without IPv6 (no map, IPv6 frames go
	// to the steering rule).
	FastFlows6 int
	// ShareFast, with FastFlows, makes the program use the fast path maps
	// of another program (its Fast) rather than new ones: the program of
	// a second interface then forwards the flows handed to either, each
	// entry on its own interface (FastEntry4.In). FastFlows and
	// FastFlows6 must be the maps' sizes.
	ShareFast *Fast
	// clock, when set, is the fast path's clock helper instead of
	// fastClock's choice (tests and benchmarks compare the two).
	clock asm.BuiltinFunc
}

// MaxFastFlows bounds Options.FastFlows: the flow map is preallocated, at
// 128 bytes per flow (memlock in fdinfo: 33,555,392 bytes for 262,144).
const MaxFastFlows = 1 << 22

// Load verifies and loads the program and its maps into the kernel.
// queues is the size of the XSKMAP: the highest receive queue id that will
// get a socket, plus one. Packets that arrive on a queue without a socket
// go to the kernel.
//
// On kernels older than 5.11 the maps are charged to RLIMIT_MEMLOCK, which
// the caller must raise (github.com/cilium/ebpf/rlimit).
func Load(queues int) (*Program, error) { return LoadWith(queues, Options{}) }

// LoadWith is Load with options.
func LoadWith(queues int, o Options) (*Program, error) {
	if queues < 1 || queues > maxQueues {
		return nil, fmt.Errorf("xdpprog: %d queues, want 1..%d", queues, maxQueues)
	}
	if o.FastFlows < 0 || o.FastFlows > MaxFastFlows {
		return nil, fmt.Errorf("xdpprog: %d fast flows, want 0..%d", o.FastFlows, MaxFastFlows)
	}
	if o.FastFlows6 < 0 || o.FastFlows6 > MaxFastFlows || o.FastFlows == 0 && o.FastFlows6 != 0 {
		return nil, fmt.Errorf("xdpprog: %d IPv6 fast flows (%d IPv4), want 0..%d with IPv4 ones", o.FastFlows6, o.FastFlows, MaxFastFlows)
	}
	clock := o.clock
	if clock == 0 {
		clock = fastClock()
	}
	spec := &ebpf.CollectionSpec{
		Maps: specs(queues, o.FastFlows, o.FastFlows6),
		Programs: map[string]*ebpf.ProgramSpec{
			progName: {
				Name:         progName,
				Type:         ebpf.XDP,
				Instructions: withoutSources(instructions(o.FastFlows > 0, o.FastFlows6 > 0, clock)),
				// No GPL-only helper is called, so no license is claimed.
			},
		},
	}
	var co ebpf.CollectionOptions
	if f := o.ShareFast; f != nil {
		if o.FastFlows == 0 || uint32(o.FastFlows) != f.flows.MaxEntries() || o.FastFlows6 != f.flows6Size() {
			return nil, fmt.Errorf("xdpprog: shared fast path of %d and %d IPv6 flows, want FastFlows %d and FastFlows6 %d",
				f.flows.MaxEntries(), f.flows6Size(), o.FastFlows, o.FastFlows6)
		}
		co.MapReplacements = map[string]*ebpf.Map{mapFast: f.flows, mapFastGen: f.gen, mapFastStat: f.stat, mapFastRef: f.ref}
		if f.flows6 != nil {
			co.MapReplacements[mapFast6] = f.flows6
		}
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, co)
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("xdpprog: %w: %w\n%s", errRejected, ve.Cause, strings.Join(ve.Log, "\n"))
		}
		return nil, fmt.Errorf("xdpprog: load: %w", err)
	}
	p := &Program{
		queues: queues,
		prog:   coll.Programs[progName],
		xsks:   coll.Maps[mapXSKs],
		vips:   newSet[addrKey](mapVIPs, coll.Maps[mapVIPs]),
		local:  newSet[addrKey](mapLocal, coll.Maps[mapLocal]),
		reply:  newSet[replyKey](mapReplies, coll.Maps[mapReplies]),
		hosts:  newSet[replyKey](mapReplyHosts, coll.Maps[mapReplyHosts]),
		links:  make(map[int]link.Link),
	}
	if o.FastFlows > 0 {
		refs, err := coll.Maps[mapFastRef].Memory()
		if err != nil {
			coll.Close()
			return nil, fmt.Errorf("xdpprog: map the fast path's counters: %w", err)
		}
		p.fast = &Fast{flows: coll.Maps[mapFast], flows6: coll.Maps[mapFast6], gen: coll.Maps[mapFastGen], stat: coll.Maps[mapFastStat], ref: coll.Maps[mapFastRef], refs: refs}
		if clock == asm.FnKtimeGetCoarseNs {
			p.fast.slack = CoarseClockSlack
		}
	}
	for _, m := range coll.Maps {
		p.maps = append(p.maps, m)
	}
	return p, nil
}

func errClosed(op string) error { return fmt.Errorf("xdpprog: %s: %w", op, net.ErrClosed) }

// Attach attaches the program to the interface with index ifindex (in the
// network namespace of the calling thread) and returns the mode actually
// used. The attachment is a BPF link held by this process: it ends with
// Close, or with the process, whichever comes first, so a crashed vipd
// leaves no program behind. Attaching fails if another XDP program is
// already attached to the interface.
func (p *Program) Attach(ifindex int, mode Mode) (Mode, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, errClosed("attach")
	}
	if _, ok := p.links[ifindex]; ok {
		return 0, fmt.Errorf("xdpprog: attach: already attached to interface %d", ifindex)
	}
	attach := func(m Mode, flags link.XDPAttachFlags) (Mode, error) {
		l, err := link.AttachXDP(link.XDPOptions{Program: p.prog, Interface: ifindex, Flags: flags})
		if err != nil {
			return 0, fmt.Errorf("xdpprog: attach to interface %d in %s mode: %w", ifindex, m, err)
		}
		p.links[ifindex] = l
		return m, nil
	}
	switch mode {
	case Native:
		return attach(Native, link.XDPDriverMode)
	case Generic:
		return attach(Generic, link.XDPGenericMode)
	case Auto:
		m, errNative := attach(Native, link.XDPDriverMode)
		if errNative == nil {
			return m, nil
		}
		m, errGeneric := attach(Generic, link.XDPGenericMode)
		if errGeneric == nil {
			return m, nil
		}
		return 0, errors.Join(errNative, errGeneric)
	}
	return 0, fmt.Errorf("xdpprog: attach: invalid mode %v", mode)
}

// Register puts the AF_XDP socket fd into the XSKMAP slot of its receive
// queue; packets the program steers on that queue go to the socket from
// now on. The kernel drops the entry by itself when the socket is closed.
func (p *Program) Register(queue, fd int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errClosed("register")
	}
	if queue < 0 || queue >= p.queues {
		return fmt.Errorf("xdpprog: register: queue %d outside the %d slots of the socket map", queue, p.queues)
	}
	if err := p.xsks.Put(uint32(queue), uint32(fd)); err != nil {
		return fmt.Errorf("xdpprog: register socket %d on queue %d: %w", fd, queue, err)
	}
	return nil
}

// Unregister empties the XSKMAP slot of queue: its packets go to the
// kernel again. An empty slot is not an error.
func (p *Program) Unregister(queue int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errClosed("unregister")
	}
	if queue < 0 || queue >= p.queues {
		return fmt.Errorf("xdpprog: unregister: queue %d outside the %d slots of the socket map", queue, p.queues)
	}
	if err := p.xsks.Delete(uint32(queue)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("xdpprog: unregister queue %d: %w", queue, err)
	}
	return nil
}

// Update replaces the steering sets: vips are the VIP addresses (IPv4 and
// IPv6), replies the NAT reply sources, local the box's own addresses.
// Nothing changes when an argument is invalid or a set exceeds its
// capacity (ErrCapacity).
//
// The maps are changed key by key while the program runs, in this order:
// additions to local, VIPs and replies, then removals from VIPs and
// replies, then removals from local. While Update runs, each set holds at
// least the keys its old and new contents share and at most their union:
// for a moment a packet may be steered under the old rules and the new
// ones together, never under a rule in neither. A key in both stays put,
// so traffic of unchanged VIPs and backends is never interrupted, and new
// local addresses are protected before any new reply source can match
// them. If Update fails midway the maps hold a mix of old and new keys
// (still within that union); the next successful Update converges.
//
// The exception is a set whose old and new keys together exceed its map
// (replacing 3,000 VIP addresses by 3,000 others): it is pruned before it
// is added to, since the kernel refuses a key past a hash map's
// max_entries. Adding first would fail midway, and so would every later
// Update, the map staying full of keys the new set lacks. For such a set
// a removed key stops matching before the new ones start to.
func (p *Program) Update(vips []netip.Addr, replies []ReplyKey, local []netip.Addr) error {
	c, err := build(vips, replies, local)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errClosed("update")
	}
	for _, step := range []func() error{
		func() error { return pruneCrowded(p.vips, c.vips) },
		func() error { return pruneCrowded(p.reply, c.replies) },
		func() error { return pruneCrowded(p.hosts, c.hosts) },
		func() error { return pruneCrowded(p.local, c.local) },
		func() error { return p.local.add(c.local) },
		func() error { return p.vips.add(c.vips) },
		func() error { return p.hosts.add(c.hosts) },
		func() error { return p.reply.add(c.replies) },
		func() error { return p.vips.prune(c.vips) },
		func() error { return p.reply.prune(c.replies) },
		func() error { return p.hosts.prune(c.hosts) },
		func() error { return p.local.prune(c.local) },
	} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// pruneCrowded prunes s first when it cannot hold its present keys and
// want's together (see Update).
func pruneCrowded[K comparable](s set[K], want map[K]struct{}) error {
	if !s.crowded(want) {
		return nil
	}
	return s.prune(want)
}

// Close detaches the program from every interface and releases the
// program and its maps. Afterwards nothing of vipd's stays in the kernel.
// Closing twice is not an error.
func (p *Program) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	var errs []error
	for ifindex, l := range p.links {
		if err := l.Close(); err != nil {
			errs = append(errs, fmt.Errorf("xdpprog: detach from interface %d: %w", ifindex, err))
		}
		delete(p.links, ifindex)
	}
	if err := p.prog.Close(); err != nil {
		errs = append(errs, fmt.Errorf("xdpprog: close program: %w", err))
	}
	for _, m := range p.maps {
		if err := m.Close(); err != nil {
			errs = append(errs, fmt.Errorf("xdpprog: close map: %w", err))
		}
	}
	return errors.Join(errs...)
}

// withoutSources drops the source comments the builder attaches for the
// golden listings: cilium/ebpf would turn them into BTF line info, which
// the kernel then wants for the first instruction too, and the program
// vipd loads carries no BTF.
func withoutSources(insns asm.Instructions) asm.Instructions {
	for i := range insns {
		if insns[i].Source() != nil {
			insns[i] = insns[i].WithSource(nil)
		}
	}
	return insns
}
