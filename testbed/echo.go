package testbed

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// EchoFlows are long-lived TCP connections to a backend echo server
// through a VIP, each streaming both ways: every round sends a chunk of
// pseudo-random bytes and checks that exactly those come back. A
// connection is broken when a write or read fails or the bytes differ
// (the TCP checksums were right, or the kernel would have dropped them:
// this catches a connection that reached another backend, which answers
// with a reset, or a stream that lost its place).
type EchoFlows struct {
	stop chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	flows   []*echoFlow
	broken  []string // why, per broken flow
	backend map[string]int
}

type echoFlow struct {
	local   netip.AddrPort
	backend string // the name its backend answered with
	rounds  int
	dead    bool
}

// Round timing: a round every roundGap, each read allowed roundTimeout
// (long enough to ride out a box's hold time and TCP's retransmission
// backoff behind it).
const (
	roundGap     = 100 * time.Millisecond
	roundTimeout = 30 * time.Second
	chunk        = 256
)

// StartEchoFlows opens n connections from the client to vip:EchoPort and
// starts streaming; it returns once every connection is open and has
// completed a round. They stop at the bed's cleanup, or with Finish.
func (b *Bed) StartEchoFlows(vip netip.Addr, n int) (*EchoFlows, error) {
	ef := &EchoFlows{stop: make(chan struct{}), backend: map[string]int{}}
	dial := Dialer(b.Client)
	addr := netip.AddrPortFrom(vip, EchoPort).String()
	ready := make(chan error, n)
	for i := 0; i < n; i++ {
		f := &echoFlow{}
		ef.flows = append(ef.flows, f)
		ef.wg.Add(1)
		go func() {
			defer ef.wg.Done()
			ef.run(f, dial, addr, uint64(i), ready)
		}()
	}
	deadline := time.After(patience)
	for i := 0; i < n; i++ {
		select {
		case err := <-ready:
			if err != nil {
				ef.Finish()
				return nil, fmt.Errorf("echo flow to %s did not start: %w", addr, err)
			}
		case <-deadline:
			ef.Finish()
			return nil, fmt.Errorf("only %d of %d echo flows to %s started within %v", i, n, addr, patience)
		}
	}
	b.t.Cleanup(ef.Finish)
	return ef, nil
}

func (ef *EchoFlows) run(f *echoFlow, dial func(context.Context, string, string) (net.Conn, error), addr string, seed uint64, ready chan<- error) {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	c, err := dial(ctx, "tcp", addr)
	cancel()
	if err != nil {
		ready <- err
		return
	}
	defer c.Close()
	f.local = netip.MustParseAddrPort(c.LocalAddr().String())
	r := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(patience))
	name, err := r.ReadString('\n')
	if err != nil {
		ready <- fmt.Errorf("reading the backend's name: %w", err)
		return
	}
	ef.mu.Lock()
	ef.backend[strings.TrimSpace(name)]++
	f.backend = strings.TrimSpace(name)
	ef.mu.Unlock()
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	out, in := make([]byte, chunk), make([]byte, chunk)
	first := true
	for {
		for i := range out {
			out[i] = byte(rng.Uint32())
		}
		c.SetDeadline(time.Now().Add(roundTimeout))
		_, err := c.Write(out)
		if err == nil {
			_, err = io.ReadFull(r, in)
		}
		if err == nil && !bytes.Equal(in, out) {
			err = fmt.Errorf("the echo differs from what was sent")
		}
		select {
		case <-ef.stop:
			return // a round cut short by the end is not a break
		default:
		}
		if err != nil {
			ef.mu.Lock()
			f.dead = true
			ef.broken = append(ef.broken, fmt.Sprintf("%s (backend %s) after %d rounds: %v", f.local, strings.TrimSpace(name), f.rounds, err))
			ef.mu.Unlock()
			if first {
				ready <- err
			}
			return
		}
		ef.mu.Lock()
		f.rounds++
		ef.mu.Unlock()
		if first {
			ready <- nil
			first = false
		}
		select {
		case <-ef.stop:
			return
		case <-time.After(roundGap):
		}
	}
}

// Settle waits until every flow still alive has completed a round after
// now, for at most d, and returns the flows broken so far, counting the
// ones that made no progress as broken (stalled).
func (ef *EchoFlows) Settle(d time.Duration) (broken []string) {
	return SettleFlows(d, func() ([]FlowProgress, []string) {
		ef.mu.Lock()
		defer ef.mu.Unlock()
		ps := make([]FlowProgress, len(ef.flows))
		for i, f := range ef.flows {
			ps[i] = FlowProgress{Local: f.local.String(), Backend: f.backend, Rounds: f.rounds, Dead: f.dead}
		}
		return ps, append([]string(nil), ef.broken...)
	})
}

// Finish stops every flow and waits for them.
func (ef *EchoFlows) Finish() {
	select {
	case <-ef.stop:
		return
	default:
	}
	close(ef.stop)
	ef.wg.Wait()
}

// Len is the number of flows started.
func (ef *EchoFlows) Len() int { return len(ef.flows) }

// EchoFlow is one flow of EchoFlows: the client's address and port, and
// the name of the backend that answered it.
type EchoFlow struct {
	Local   netip.AddrPort
	Backend string
}

// Flows lists the flows started.
func (ef *EchoFlows) Flows() []EchoFlow {
	ef.mu.Lock()
	defer ef.mu.Unlock()
	out := make([]EchoFlow, len(ef.flows))
	for i, f := range ef.flows {
		out[i] = EchoFlow{f.local, f.backend}
	}
	return out
}

// Backends counts the flows by the backend that answered them.
func (ef *EchoFlows) Backends() map[string]int {
	ef.mu.Lock()
	defer ef.mu.Unlock()
	return maps.Clone(ef.backend)
}

// FirstN joins the first n of s, saying how many more there are.
func FirstN(s []string, n int) string {
	if len(s) > n {
		s = append(s[:n:n], fmt.Sprintf("… and %d more", len(s)-n))
	}
	return strings.Join(s, "\n  ")
}
