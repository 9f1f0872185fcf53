package linkwatch

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jsimonetti/rtnetlink/v2"
	"golang.org/x/sys/unix"
)

var (
	macA = [6]byte{0x02, 0x00, 0x5e, 0x00, 0x00, 0x0a}
	macB = [6]byte{0x02, 0x00, 0x5e, 0x00, 0x00, 0x0b}
	macC = [6]byte{0x02, 0x00, 0x5e, 0x00, 0x00, 0x0c}
)

const (
	eth0 = 2
	wait = 30 * time.Second // the longest a test waits for a report that should come
)

var hostLink = Link{Index: eth0, Name: "eth0", MAC: macA, MTU: 1500, Addrs: []netip.Prefix{
	netip.MustParsePrefix("198.18.0.1/24"), netip.MustParsePrefix("2001:2::1/64"), netip.MustParsePrefix("fe80::1/64")}}

// fakeLister is the kernel's link table, as the test sets it.
type fakeLister struct {
	mu       sync.Mutex
	links    []Link
	failNext error // returned once by the next Links call
}

func testLister() *fakeLister { return &fakeLister{links: []Link{hostLink}} }

func (k *fakeLister) Links() ([]Link, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.failNext; err != nil {
		k.failNext = nil
		return nil, err
	}
	out := make([]Link, len(k.links))
	for i, l := range k.links {
		l.Addrs = slices.Clone(l.Addrs)
		out[i] = l
	}
	return out, nil
}

func TestFromMessages(t *testing.T) {
	lm := []rtnetlink.LinkMessage{
		{Index: 1, Attributes: &rtnetlink.LinkAttributes{Name: "lo", MTU: 65536, Address: make(net.HardwareAddr, 6)}},
		{Index: 2, Attributes: &rtnetlink.LinkAttributes{Name: "eth0", MTU: 9000, Address: net.HardwareAddr(macA[:])}},
		{Index: 3, Attributes: &rtnetlink.LinkAttributes{Name: "tun0", MTU: 1420, Info: &rtnetlink.LinkInfo{Kind: "tun"}}}, // no L2 address
	}
	am := []rtnetlink.AddressMessage{
		{Family: unix.AF_INET6, PrefixLength: 64, Index: 2, Attributes: &rtnetlink.AddressAttributes{Address: net.ParseIP("2001:2::1")}},
		{Family: unix.AF_INET, PrefixLength: 24, Index: 2, Attributes: &rtnetlink.AddressAttributes{
			Address: net.ParseIP("198.18.0.1").To4(), Local: net.ParseIP("198.18.0.1").To4()}},
		// Point-to-point: IFA_ADDRESS is the peer, IFA_LOCAL our own.
		{Family: unix.AF_INET, PrefixLength: 32, Index: 3, Attributes: &rtnetlink.AddressAttributes{
			Address: net.ParseIP("198.18.9.2").To4(), Local: net.ParseIP("198.18.9.1").To4()}},
		{Family: unix.AF_INET, PrefixLength: 8, Index: 1, Attributes: &rtnetlink.AddressAttributes{Local: net.ParseIP("127.0.0.1")}},
		{Family: unix.AF_INET, PrefixLength: 24, Index: 99}, // unknown link, no attributes: skipped
		// keepalived's virtual addresses: one in eth0's subnet (the
		// kernel flags it secondary), one host address; both sort after
		// eth0's own, though lower.
		{Family: unix.AF_INET, PrefixLength: 24, Index: 2, Flags: unix.IFA_F_SECONDARY, Attributes: &rtnetlink.AddressAttributes{
			Address: net.ParseIP("198.18.0.0").To4(), Local: net.ParseIP("198.18.0.0").To4()}},
		{Family: unix.AF_INET, PrefixLength: 32, Index: 2, Attributes: &rtnetlink.AddressAttributes{
			Address: net.ParseIP("198.19.0.9").To4(), Local: net.ParseIP("198.19.0.9").To4()}},
	}
	got := FromMessages(lm, am)
	want := []Link{
		{Index: 1, Name: "lo", MTU: 65536, Addrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8")}},
		{Index: 2, Name: "eth0", MAC: macA, MTU: 9000, Addrs: []netip.Prefix{
			netip.MustParsePrefix("198.18.0.1/24"), netip.MustParsePrefix("2001:2::1/64"),
			netip.MustParsePrefix("198.18.0.0/24"), netip.MustParsePrefix("198.19.0.9/32")}},
		{Index: 3, Name: "tun0", MTU: 1420, Kind: "tun", Addrs: []netip.Prefix{netip.MustParsePrefix("198.18.9.1/32")}},
	}
	if !slices.EqualFunc(got, want, Link.Equal) {
		t.Errorf("FromMessages =\n%+v\nwant\n%+v", got, want)
	}
}

// fakeEvents feeds watch.
type fakeEvents struct {
	refs      chan []linkRef
	closed    chan struct{}
	closeOnce sync.Once
}

func newFakeEvents() *fakeEvents {
	return &fakeEvents{refs: make(chan []linkRef, 100), closed: make(chan struct{})}
}

func (e *fakeEvents) Next() ([]linkRef, error) {
	select {
	case r := <-e.refs:
		if r == nil {
			return nil, errors.New("netlink: receive: bad file descriptor")
		}
		return r, nil
	case <-e.closed:
		return nil, net.ErrClosed
	}
}

func (e *fakeEvents) Close() error {
	e.closeOnce.Do(func() { close(e.closed) })
	return nil
}

func (k *fakeLister) setLink(l Link) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for i := range k.links {
		if k.links[i].Name == l.Name {
			k.links[i] = l
			return
		}
	}
	k.links = append(k.links, l)
}

func (k *fakeLister) dropLink(name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.links = slices.DeleteFunc(k.links, func(l Link) bool { return l.Name == name })
}

func TestWatch(t *testing.T) {
	old := coalesce
	// Long enough that the test's three sends of a burst, which a busy
	// machine may delay by hundreds of milliseconds, fall in one window.
	coalesce = 500 * time.Millisecond
	t.Cleanup(func() { coalesce = old })

	k := testLister()
	other := Link{Index: 9, Name: "eth1", MAC: macB, MTU: 1500}
	k.links = append(k.links, other)
	ev := newFakeEvents()
	got := make(chan Link, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- watch(ctx, k, ev, []string{"eth0", "vipd1"}, func(l Link) { got <- l }) }()
	next := func() Link {
		t.Helper()
		select {
		case l := <-got:
			return l
		case <-time.After(wait):
			t.Fatalf("fn not called within %v", wait)
			return Link{}
		}
	}
	// none fails on a report within two windows: one that a second window
	// opened by a straggler of the burst would make. (A busy machine may
	// make it later, and none miss it; it never reports one that is not
	// there.)
	none := func() {
		t.Helper()
		select {
		case l := <-got:
			t.Fatalf("unexpected report %+v", l)
		case <-time.After(2 * coalesce):
		}
	}

	// The current state first; a watched link that does not exist is not
	// reported.
	if l := next(); !l.Equal(hostLink) {
		t.Fatalf("first report %+v, want %+v", l, hostLink)
	}
	none()

	// A burst of MTU notifications is one report, with the final state.
	for _, mtu := range []int{1400, 1300, 1280} {
		l := hostLink
		l.MTU = mtu
		k.setLink(l)
		ev.refs <- []linkRef{{Index: eth0, Name: "eth0"}}
	}
	if l := next(); l.MTU != 1280 {
		t.Errorf("MTU %d after burst, want 1280", l.MTU)
	}
	none()

	// Changes on other links, and notifications without a change, report
	// nothing.
	other.MTU = 9000
	k.setLink(other)
	ev.refs <- []linkRef{{Index: 9, Name: "eth1"}}
	ev.refs <- []linkRef{{Index: eth0}}
	none()

	// An address change (address messages carry only the index).
	l := hostLink
	l.MTU = 1280
	l.Addrs = append(slices.Clone(l.Addrs), netip.MustParsePrefix("198.18.0.9/24"))
	SortPrefixes(l.Addrs)
	k.setLink(l)
	ev.refs <- []linkRef{{Index: eth0}}
	if r := next(); !r.Equal(l) {
		t.Errorf("after address change %+v, want %+v", r, l)
	}

	// A watched link appears, by name, with an index never seen before.
	vipd1 := Link{Index: 12, Name: "vipd1", MAC: macC, MTU: 1500}
	k.setLink(vipd1)
	ev.refs <- []linkRef{{Index: 12, Name: "vipd1"}}
	if r := next(); !r.Equal(vipd1) {
		t.Errorf("new link %+v, want %+v", r, vipd1)
	}

	// ... and disappears: reported once as Index 0.
	k.dropLink("vipd1")
	ev.refs <- []linkRef{{Index: 12, Name: "vipd1"}}
	if r := next(); r.Index != 0 || r.Name != "vipd1" {
		t.Errorf("removed link reported as %+v", r)
	}

	// Lost notifications (ENOBUFS) mean re-read.
	l.MTU = 1500
	k.setLink(l)
	ev.refs <- []linkRef{{}}
	if r := next(); r.MTU != 1500 {
		t.Errorf("after overflow MTU %d, want 1500", r.MTU)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("watch: %v", err)
		}
	case <-time.After(wait):
		t.Fatal("watch did not return after cancel")
	}
}

func TestWatchErrors(t *testing.T) {
	k := testLister()
	ev := newFakeEvents()
	ev.refs <- nil // a receive error
	err := watch(context.Background(), k, ev, []string{"eth0"}, func(Link) {})
	if err == nil {
		t.Error("watch returned nil after a receive error")
	}

	k.failNext = errors.New("netlink dump interrupted")
	if err := watch(context.Background(), k, newFakeEvents(), []string{"eth0"}, func(Link) {}); err == nil {
		t.Error("watch returned nil when the first read fails")
	}
}
