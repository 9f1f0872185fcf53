// Command xdpfwd is the bare AF_XDP forwarder of the benchmark rig: vipd's
// own I/O path without vipd's logic. It opens the same afxdp sockets with
// the same options as vipd's defaults, attaches the same XDP steering
// program to both interfaces (steering the -vip addresses), and per queue
// runs one goroutine on a locked OS thread (GOMAXPROCS at least one more
// than the queues, as in vipd: internal/procs) that receives a batch, sets each
// frame's destination MAC to -dst-mac and its source MAC to the egress
// interface's, marks it for the egress port and transmits the batch. What
// vipd does beyond that (parse, conntrack, Maglev, NAT or IPIP) is what
// the rig's vipd/forwarder ratio prices.
//
// It must run inside the box's network namespace, as root. Once set up it
// writes {"ready":true} to stdout; then, on each SIGUSR1, it writes its cumulative counters as one JSON line to stdout; SIGTERM or
// SIGINT stops it and detaches the program.
//
//	xdpfwd -in eth0 -out eth1 -queues 1 -dst-mac 02:.. -vip 198.18.0.100
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/dataplane"
	"github.com/vipd/vipd/dataplane/afxdp"
	"github.com/vipd/vipd/dataplane/xdpprog"
	"github.com/vipd/vipd/internal/procs"
)

// Stats is what SIGUSR1 prints: the driver's counters summed over queues,
// plus the forwarder's own batch count.
type Stats struct {
	afxdp.Stats
	Batches  uint64   `json:"batches"`
	PerQueue []uint64 `json:"per_queue_rx"`
}

func main() {
	in := flag.String("in", "eth0", "ingress interface")
	out := flag.String("out", "eth1", "egress interface")
	queues := flag.Int("queues", 1, "queues served, one worker each")
	dst := flag.String("dst-mac", "", "destination MAC written into every frame (the next hop's)")
	vips := flag.String("vip", "", "comma-separated addresses the XDP program steers to the sockets")
	batch := flag.Int("batch", config.DefaultBatchSize, "frames per receive call")
	frameSize := flag.Int("frame-size", config.DefaultFrameSize, "UMEM frame size, 2048 or 4096; 0 picks by the interfaces' MTUs, as vipd does")
	flag.Parse()
	if err := run(*in, *out, *queues, *dst, *vips, *batch, *frameSize); err != nil {
		fmt.Fprintln(os.Stderr, "xdpfwd:", err)
		os.Exit(1)
	}
}

func run(inName, outName string, queues int, dstMAC, vipList string, batch, frameSize int) error {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGTERM, syscall.SIGINT)
	dst, err := net.ParseMAC(dstMAC)
	if err != nil || len(dst) != 6 {
		return fmt.Errorf("-dst-mac %q: want a MAC address", dstMAC)
	}
	var vips []netip.Addr
	for _, s := range strings.Split(vipList, ",") {
		a, err := netip.ParseAddr(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("-vip: %v", err)
		}
		vips = append(vips, a)
	}
	inIf, err := net.InterfaceByName(inName)
	if err != nil {
		return err
	}
	outIf, err := net.InterfaceByName(outName)
	if err != nil {
		return err
	}
	// As vipd does (internal/procs): a P for the rest besides the workers'.
	procs.Spare(queues)
	if frameSize == 0 {
		frameSize = dataplane.FrameSizeFor(afxdp.MaxFrame, afxdp.FrameOverhead, inIf.MTU, outIf.MTU)
	}
	// vipd's defaults (config.Default, daemon.openAFXDP).
	opts := afxdp.Options{
		FrameSize: frameSize, FrameCount: config.DefaultFrameCount,
		RxRing: config.DefaultRingSize, TxRing: config.DefaultRingSize,
		FillRing: config.DefaultRingSize, CompletionRing: config.DefaultRingSize,
		TxBudget: max(batch, 64),
	}
	var socks [2][]*afxdp.Socket
	for port, ifi := range []*net.Interface{inIf, outIf} {
		prog, err := xdpprog.Load(queues)
		if err != nil {
			return err
		}
		defer prog.Close()
		for q := 0; q < queues; q++ {
			s, err := afxdp.Open(ifi.Index, q, opts)
			if err != nil {
				return err
			}
			socks[port] = append(socks[port], s)
			if err := prog.Register(q, s.FD()); err != nil {
				return err
			}
		}
		if err := prog.Update(vips, nil, nil); err != nil {
			return err
		}
		if _, err := prog.Attach(ifi.Index, xdpprog.Auto); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var src [6]byte
	copy(src[:], outIf.HardwareAddr)
	var d [6]byte
	copy(d[:], dst)

	fwds := make([]*forwarder, queues)
	var wg sync.WaitGroup
	errc := make(chan error, queues)
	for q := range fwds {
		f := &forwarder{q: afxdp.NewQueue(socks[0][q], socks[1][q], batch), dst: d, src: src}
		fwds[q] = f
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f.run(ctx, batch); err != nil {
				errc <- err
			}
		}()
	}
	enc := json.NewEncoder(os.Stdout)
	// Ready only now that SIGUSR1 no longer kills the process.
	enc.Encode(map[string]bool{"ready": true})
	for {
		select {
		case s := <-sigs:
			if s == syscall.SIGUSR1 {
				enc.Encode(collect(fwds))
				continue
			}
			cancel()
			wg.Wait()
			for _, f := range fwds {
				f.q.Close()
			}
			return nil
		case err := <-errc:
			cancel()
			wg.Wait()
			return err
		}
	}
}

func collect(fwds []*forwarder) Stats {
	var st Stats
	st.TxBudget = true
	for _, f := range fwds {
		s := f.q.Stats()
		st.RxFrames += s.RxFrames
		st.TxFrames += s.TxFrames
		st.TxRingFull += s.TxRingFull
		st.NoFrame += s.NoFrame
		st.FillStarved += s.FillStarved
		st.Kicks += s.Kicks
		st.KickErrors += s.KickErrors
		st.RxDropped += s.RxDropped
		st.RxRingFull += s.RxRingFull
		st.RxFillRingEmpty += s.RxFillRingEmpty
		st.TxRingEmpty += s.TxRingEmpty
		st.RxInvalid += s.RxInvalid
		st.TxInvalid += s.TxInvalid
		st.TxBudget = st.TxBudget && s.TxBudget
		st.Batches += f.batches.Load()
		st.PerQueue = append(st.PerQueue, s.RxFrames)
	}
	return st
}

// forwarder is one queue's worker.
type forwarder struct {
	q        *afxdp.Queue
	dst, src [6]byte
	batches  atomic.Uint64
}

// run mirrors dataplane.Worker.Run: receive (sleeping in poll only when
// idle), touch every frame, transmit.
func (f *forwarder) run(ctx context.Context, batch int) error {
	runtime.LockOSThread()
	descs := make([]dataplane.Desc, batch)
	var y procs.Yielder
	for ctx.Err() == nil {
		n, err := f.q.Receive(descs, 100*time.Millisecond)
		if err != nil {
			return err
		}
		if n == 0 {
			continue
		}
		for i := range descs[:n] {
			d := &descs[i]
			fr := d.Buf[d.Off : d.Off+d.Len]
			if len(fr) < 14 {
				d.Verdict = dataplane.VerdictDrop
				continue
			}
			copy(fr[0:6], f.dst[:])
			copy(fr[6:12], f.src[:])
			d.Verdict, d.Port = dataplane.VerdictTX, dataplane.PortEgress
		}
		f.batches.Add(1)
		if err := f.q.Transmit(descs[:n]); err != nil {
			return err
		}
		y.Busy(dataplane.Nanotime()) // as vipd's workers do
	}
	return nil
}
