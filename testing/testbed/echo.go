package testbed

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"time"
)

// EchoFlows are long-lived TCP connections to a backend echo server
// through a VIP, each streaming both ways: every round sends a chunk of
// pseudo-random bytes and checks that exactly those come back. A
// connection is broken when a write or read fails or the bytes differ
// (the TCP checksums were right, or the kernel would have dropped them:
// this catches a connection that reached another backend, which answers
// with a reset, or a stream that lost its place). Settle, Finish, Len
// and Backends are its Streams'.
type EchoFlows struct {
	*Streams
}

// chunk is the size of an echo flow's rounds.
const chunk = 256

// StartEchoFlows opens n connections from the client to vip:EchoPort and
// starts streaming; it returns once every connection is open and has
// completed a round. They stop at the bed's cleanup, or with Finish.
func (b *Bed) StartEchoFlows(vip netip.Addr, n int) (*EchoFlows, error) {
	ef := &EchoFlows{NewStreams(n)}
	dial := Dialer(b.Client)
	addr := netip.AddrPortFrom(vip, EchoPort).String()
	if err := ef.Start("echo", addr, patience, func(i int) { runEcho(ef.Stream(i), dial, addr, uint64(i)) }); err != nil {
		return nil, err
	}
	b.t.Cleanup(ef.Finish)
	return ef, nil
}

// runEcho is an echo flow's life: connect, read the backend's name, then
// the rounds of Stream.Echo.
func runEcho(st *Stream, dial func(context.Context, string, string) (net.Conn, error), addr string, seed uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	c, err := dial(ctx, "tcp", addr)
	cancel()
	if err != nil {
		st.Fail(err)
		return
	}
	defer c.Close()
	st.SetLocal(c.LocalAddr().String())
	r := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(patience))
	name, err := r.ReadString('\n')
	if err != nil {
		st.Fail(fmt.Errorf("reading the backend's name: %w", err))
		return
	}
	st.Answered(strings.TrimSpace(name))
	st.Echo(c, r, rand.New(rand.NewPCG(seed, 0x5eed)), chunk, nil)
}

// EchoFlow is one flow of EchoFlows: the client's address and port, and
// the name of the backend that answered it.
type EchoFlow struct {
	Local   netip.AddrPort
	Backend string
}

// Flows lists the flows started.
func (ef *EchoFlows) Flows() []EchoFlow {
	ps, _ := ef.Progress()
	out := make([]EchoFlow, len(ps))
	for i, p := range ps {
		local, _ := netip.ParseAddrPort(p.Local)
		out[i] = EchoFlow{local, p.Backend}
	}
	return out
}

// FirstN joins the first n of s, saying how many more there are.
func FirstN(s []string, n int) string {
	if len(s) > n {
		s = append(s[:n:n], fmt.Sprintf("… and %d more", len(s)-n))
	}
	return strings.Join(s, "\n  ")
}
