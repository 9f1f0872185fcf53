package linkwatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jsimonetti/rtnetlink/v2"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// coalesce is how long Watch waits after a change for more changes
// before it re-reads: "ip link set mtu" alone produces several messages, and
// an address flush one per address.
var coalesce = 100 * time.Millisecond

// Watch follows the interfaces called names until ctx is done, then
// returns nil; it returns an error when it cannot subscribe or read.
//
// It first calls fn with the current state of every watched link that exists
// (so nothing that changes between a Read and Watch is lost), then
// whenever a watched link's MTU, MAC, index or addresses change. Bursts of
// kernel notifications within coalesce are reported once, with the state
// after the burst. A watched link that disappears is reported once as
// Link{Name: name} (Index 0), and in full when it comes back.
//
// fn runs on the calling goroutine, one call at a time.
func Watch(ctx context.Context, names []string, fn func(Link)) error {
	// Subscribe before the first read so that no change falls in between.
	sub, err := rtnetlink.Dial(&netlink.Config{
		Groups: unix.RTMGRP_LINK | unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV6_IFADDR,
	})
	if err != nil {
		return fmt.Errorf("linkwatch: subscribe to link changes: %w", err)
	}
	c, err := rtnetlink.Dial(nil)
	if err != nil {
		sub.Close()
		return fmt.Errorf("linkwatch: dial rtnetlink: %w", err)
	}
	defer c.Close()
	return watch(ctx, connLister{c}, &rtnlEvents{c: sub}, names, fn)
}

// lister lists the links: the kernel, or a fake in tests.
type lister interface {
	Links() ([]Link, error)
}

type connLister struct{ c *rtnetlink.Conn }

func (l connLister) Links() ([]Link, error) { return List(l.c) }

// linkEvents is a source of link and address change notifications.
type linkEvents interface {
	// Next blocks until notifications arrive and returns the interfaces
	// they name; a zero-index entry means "unknown, re-read everything".
	Next() ([]linkRef, error)
	// Close unblocks Next, which then returns an error.
	Close() error
}

type linkRef struct {
	Index int
	Name  string // set for link messages only
}

type rtnlEvents struct{ c *rtnetlink.Conn }

func (e *rtnlEvents) Close() error { return e.c.Close() }

func (e *rtnlEvents) Next() ([]linkRef, error) {
	msgs, _, err := e.c.Receive()
	if err != nil {
		// The socket buffer overflowed and notifications were lost: the
		// state must be read again, which is what the caller does anyway.
		if errors.Is(err, unix.ENOBUFS) {
			return []linkRef{{}}, nil
		}
		return nil, err
	}
	refs := make([]linkRef, 0, len(msgs))
	for _, m := range msgs {
		switch m := m.(type) {
		case *rtnetlink.LinkMessage:
			r := linkRef{Index: int(m.Index)}
			if m.Attributes != nil {
				r.Name = m.Attributes.Name
			}
			refs = append(refs, r)
		case *rtnetlink.AddressMessage:
			refs = append(refs, linkRef{Index: int(m.Index)})
		}
	}
	return refs, nil
}

func watch(ctx context.Context, k lister, ev linkEvents, names []string, fn func(Link)) error {
	indices := map[int]bool{} // indices of the watched links at the last read
	last := map[string]Link{} // what fn was last told, by name; absent: never told
	read := func() error {
		links, err := k.Links()
		if err != nil {
			return err
		}
		clear(indices)
		for _, name := range names {
			cur, err := Find(links, name)
			if err != nil {
				cur = Link{Name: name}
			}
			if cur.Index != 0 {
				indices[cur.Index] = true
			}
			prev, told := last[name]
			if told && prev.Equal(cur) || !told && cur.Index == 0 {
				continue
			}
			last[name] = cur
			fn(cur)
		}
		return nil
	}

	// The event goroutine only queues what it hears; relevance is judged
	// here, against the indices of the latest read, so that a notification
	// racing with a read is judged after it and never dropped.
	var (
		mu      sync.Mutex
		pending []linkRef
	)
	take := func() []linkRef {
		mu.Lock()
		defer mu.Unlock()
		p := pending
		pending = nil
		return p
	}
	relevant := func(refs []linkRef) bool {
		for _, r := range refs {
			if r.Index == 0 || indices[r.Index] || slices.Contains(names, r.Name) {
				return true
			}
		}
		return false
	}
	dirty := make(chan struct{}, 1)
	failed := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			refs, err := ev.Next()
			if err != nil {
				failed <- err
				return
			}
			mu.Lock()
			pending = append(pending, refs...)
			mu.Unlock()
			select {
			case dirty <- struct{}{}:
			default:
			}
		}
	}()
	defer wg.Wait()
	defer ev.Close()

	if err := read(); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-failed:
			return fmt.Errorf("linkwatch: link notifications: %w", err)
		case <-dirty:
		}
		if !relevant(take()) {
			continue
		}
		// Let the burst finish. What arrives during the wait is covered by
		// the read that follows; what arrives during the read is judged on
		// the next turn.
		t := time.NewTimer(coalesce)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		take()
		select {
		case <-dirty:
		default:
		}
		if err := read(); err != nil {
			return err
		}
	}
}
