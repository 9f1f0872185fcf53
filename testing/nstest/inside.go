package nstest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Interface returns interface ifname of the namespace as it is there
// (index, MTU, hardware address, flags).
func (n *NS) Interface(tb T, ifname string) *net.Interface {
	tb.Helper()
	var ifi *net.Interface
	if err := n.Do(func() (err error) { ifi, err = net.InterfaceByName(ifname); return err }); err != nil {
		tb.Fatalf("interface %s in %s: %v", ifname, n.Name, err)
	}
	return ifi
}

// Do runs f on an OS thread switched into the namespace and waits for it
// to return. The thread is a fresh goroutine's, locked for the call; it is
// switched back before it is unlocked, and if that fails it stays locked,
// so that the runtime ends it with the goroutine: no other goroutine ever
// runs in a foreign namespace. Sockets f creates stay in the namespace and
// may be used from any goroutine after Do returns. f must not call
// t.FailNow (it does not run on the test's goroutine); t.Error is fine.
func (n *NS) Do(f func() error) error {
	return <-n.Go(f)
}

// Go is Do that does not wait: f runs in the namespace on a goroutine of
// its own (a Run method, say), and the channel receives what Do would
// return once f has returned.
func (n *NS) Go(f func() error) <-chan error {
	errc := make(chan error, 1)
	go func() {
		err := errors.New("nstest: the function run in the namespace exited its goroutine")
		defer func() { errc <- err }()
		runtime.LockOSThread()
		orig, oerr := os.Open("/proc/thread-self/ns/net")
		if oerr != nil {
			runtime.UnlockOSThread()
			err = oerr
			return
		}
		defer orig.Close()
		target, terr := os.Open("/var/run/netns/" + n.Name)
		if terr != nil {
			runtime.UnlockOSThread()
			err = terr
			return
		}
		defer target.Close()
		if serr := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); serr != nil {
			runtime.UnlockOSThread()
			err = fmt.Errorf("setns %s: %w", n.Name, serr)
			return
		}
		defer func() {
			if serr := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); serr != nil {
				// Stay locked: the thread dies with this goroutine.
				err = fmt.Errorf("setns back from %s: %w (thread discarded)", n.Name, serr)
				return
			}
			runtime.UnlockOSThread()
		}()
		err = f()
	}()
	return errc
}

// Make calls newV inside n — for a value whose sockets must belong to n:
// a tunnel, a prober — and returns what it made; an error fails the test:
// "<what> in <namespace>: <error>".
func Make[V any](tb T, n *NS, what string, newV func() (V, error)) V {
	tb.Helper()
	var v V
	if err := n.Do(func() (err error) { v, err = newV(); return err }); err != nil {
		tb.Fatalf("%s in %s: %v", what, n.Name, err)
	}
	return v
}

// ServeTCP listens on addr inside n with lc (whose Control may set socket
// options: IP_FREEBIND, say) and hands every connection to serve, on a
// goroutine of its own, until cleanup closes the listener and waits for
// every serve to return.
func (n *NS) ServeTCP(tb T, lc net.ListenConfig, addr netip.AddrPort, serve func(net.Conn)) {
	tb.Helper()
	ln := Make(tb, n, "listen "+addr.String(), func() (net.Listener, error) {
		return lc.Listen(context.Background(), "tcp", addr.String())
	})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { serve(c) })
		}
	})
	tb.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
}

// ListenUDP opens a UDP socket on addr inside n; it is closed at cleanup.
func (n *NS) ListenUDP(tb T, addr netip.AddrPort) *net.UDPConn {
	tb.Helper()
	c := Make(tb, n, "listen "+addr.String(), func() (*net.UDPConn, error) {
		return net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
	})
	tb.Cleanup(func() { c.Close() })
	return c
}

// SendUDP sends payload in one datagram from n to dst, from a port of the
// kernel's choosing.
func (n *NS) SendUDP(tb T, dst netip.AddrPort, payload []byte) {
	tb.Helper()
	err := n.Do(func() error {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write(payload)
		return err
	})
	if err != nil {
		tb.Fatalf("send to %v from %s: %v", dst, n.Name, err)
	}
}

// ReadUDP returns the payload of the next datagram c receives within
// timeout; none fails the test.
func ReadUDP(tb T, c *net.UDPConn, timeout time.Duration) string {
	tb.Helper()
	c.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 1<<16)
	n, err := c.Read(buf)
	if err != nil {
		tb.Fatalf("no datagram reached %v within %v: %v", c.LocalAddr(), timeout, err)
	}
	return string(buf[:n])
}
