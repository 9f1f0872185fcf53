package daemon

import (
	"context"
	"net/netip"
	"sync"

	"github.com/vipd/vipd/control"
	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/dataplane"
	"github.com/vipd/vipd/dataplane/memq"
)

// memPlatform is the in-memory Platform: memq queues and a fixed host.
// Its hooks, set before Run, let a test act at a precise moment of the
// daemon's start.
type memPlatform struct {
	mu           sync.Mutex
	queues       []*memq.Queue
	steering     Steering     // the last one applied
	neighborVIPs []netip.Addr // the last ARP/NDP set
	applied      int          // Apply calls
	closed       bool
	host         control.Host

	// onOpen runs inside OpenQueues; openErr is what OpenQueues returns.
	onOpen  func()
	openErr error
	// onApply runs inside Apply (under the daemon's lock), with the
	// number of Apply calls so far, this one included.
	onApply func(n int)
	// onRun runs in Run before the host is reported ready: the daemon
	// then waits for its first view of the host.
	onRun func()
	// wrap, when set, replaces queue i as the workers see it.
	wrap func(i int, q dataplane.Queue) dataplane.Queue
	// runErr, when set, is where Run takes an error to fail with.
	runErr chan error
}

func newMemPlatform() *memPlatform {
	return &memPlatform{host: control.Host{
		Host: dataplane.Host{
			MAC:            [2][6]byte{{2, 0, 0, 0, 0, 0x10}, {2, 0, 0, 0, 0, 0x11}},
			MTU:            [2]int{1500, 1500},
			Addr4:          [2]netip.Addr{netip.MustParseAddr("198.18.0.254"), netip.MustParseAddr("198.18.1.1")},
			ClientGateway4: [6]byte{2, 0, 0, 0, 0, 0x20},
		},
		NextHop: func(a netip.Addr) ([6]byte, bool) {
			b := a.As4()
			return [6]byte{2, 0, 0, 0, 1, b[3]}, true
		},
	}}
}

func (p *memPlatform) OpenQueues(dp *config.Dataplane) ([]dataplane.Queue, error) {
	if p.onOpen != nil {
		p.onOpen()
	}
	if p.openErr != nil {
		return nil, p.openErr
	}
	var qs []dataplane.Queue
	for i := 0; i < dp.Queues; i++ {
		q := memq.New(1024)
		p.queues = append(p.queues, q)
		if p.wrap != nil {
			qs = append(qs, p.wrap(i, q))
		} else {
			qs = append(qs, q)
		}
	}
	return qs, nil
}

func (p *memPlatform) Host() control.Host { return p.host }

func (p *memPlatform) Apply(s Steering) error {
	p.mu.Lock()
	p.steering = s
	p.applied++
	n := p.applied
	p.mu.Unlock()
	if p.onApply != nil {
		p.onApply(n)
	}
	return nil
}

func (p *memPlatform) SetNeighborVIPs(addrs []netip.Addr) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.neighborVIPs = addrs
}

func (p *memPlatform) lastNeighborVIPs() []netip.Addr {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.neighborVIPs
}

func (p *memPlatform) lastSteering() Steering {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.steering
}

func (p *memPlatform) Run(ctx context.Context, changed func()) error {
	if p.onRun != nil {
		p.onRun()
	}
	changed() // the in-memory host is ready at once
	select {
	case <-ctx.Done():
		return nil
	case err := <-p.runErr: // nil channel without runErr: never
		return err
	}
}

func (p *memPlatform) DriverStats() map[string]uint64 { return map[string]uint64{"test": 1} }

func (p *memPlatform) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	return nil
}
