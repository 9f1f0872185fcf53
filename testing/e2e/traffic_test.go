package e2e

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vipd/vipd/testing/testbed"
)

var drivers = []string{"afxdp", "afpacket"}

// TestBalance: 300 requests on fresh connections all succeed and spread by
// weight (NAT 2:1:1, DSR 1:1:1), with both drivers.
func TestBalance(t *testing.T) {
	for _, io := range drivers {
		t.Run(io, func(t *testing.T) {
			e := setup(t, testbed.Options{}, testbed.ConfigOptions{IO: io, Weights: []int{2, 1, 1}})
			// Record the client side of every NAT connection: vipd counts
			// a new flow per distinct (address, port), and the kernel may
			// give a later connection a port an earlier one used.
			dials := &dialLog{}
			e.c = &http.Client{
				Transport: &http.Transport{DialContext: dials.wrap(testbed.Dialer(e.bed.Client)), DisableKeepAlives: true},
				Timeout:   60 * time.Second,
			}
			const n = 300
			checkShares(t, e.names(natURL, n), map[string]int{"backend1": 2, "backend2": 1, "backend3": 1}, n)
			conns, tuples := dials.count()
			if conns < n {
				t.Fatalf("%d connections for %d requests", conns, n)
			}
			if tuples < conns {
				t.Logf("the kernel reused client ports: %d connections from %d distinct ones", conns, tuples)
			}
			checkShares(t, e.names(dsrURL, n), map[string]int{"backend1": 1, "backend2": 1, "backend3": 1}, n)
			if v := e.eventually(func(v float64) bool { return v >= float64(tuples) }, "vipd_vip_new_flows_total", "vip", "web-nat"); v < float64(tuples) {
				t.Errorf("vipd counted %v new NAT flows for %d connections from %d distinct client ports (lookups: %v hits, %v misses; repicked %v, untracked %v)",
					v, conns, tuples, e.metric("vipd_flow_lookups_total", "result", "hit"), e.metric("vipd_flow_lookups_total", "result", "miss"),
					e.metric("vipd_flows_repicked_total"), e.metric("vipd_flows_untracked_total"))
			}
			if err := e.v.Stop(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestLargeTransfers: 64 MiB down and up through each VIP arrive intact.
func TestLargeTransfers(t *testing.T) {
	for _, io := range drivers {
		t.Run(io, func(t *testing.T) {
			e := setup(t, testbed.Options{}, testbed.ConfigOptions{IO: io})
			const size = 64 << 20
			for _, url := range []string{natURL, dsrURL} {
				if _, err := e.download(url, size); err != nil {
					t.Errorf("download from %s: %v", url, err)
				}
				if _, err := e.upload(url, size); err != nil {
					t.Errorf("upload to %s: %v", url, err)
				}
			}
		})
	}
}

// TestOneArmed: the box has one interface for clients and backends; NAT and
// DSR still balance and carry a large transfer.
func TestOneArmed(t *testing.T) {
	for _, io := range drivers {
		t.Run(io, func(t *testing.T) {
			e := setup(t, testbed.Options{Layout: testbed.OneArmed}, testbed.ConfigOptions{IO: io})
			const n = 150
			checkShares(t, e.names(natURL, n), map[string]int{"backend1": 1, "backend2": 1, "backend3": 1}, n)
			checkShares(t, e.names(dsrURL, n), map[string]int{"backend1": 1, "backend2": 1, "backend3": 1}, n)
			for _, url := range []string{natURL, dsrURL} {
				if _, err := e.download(url, 16<<20); err != nil {
					t.Errorf("download from %s: %v", url, err)
				}
			}
		})
	}
}

// TestOnLinkClient: a client on the box's own subnet (the router's
// namespace, 198.18.0.254) gets its NAT replies addressed to the MAC vipd
// learned from its requests; the kernel never resolved it.
func TestOnLinkClient(t *testing.T) {
	e := setup(t, testbed.Options{}, testbed.ConfigOptions{})
	c := &http.Client{Transport: &http.Transport{DialContext: testbed.Dialer(e.bed.Router), DisableKeepAlives: true}, Timeout: patience}
	m := e.markNAT("web-nat", append(e.backendNS(), e.bed.Router)...)
	for i := 0; i < 20; i++ {
		if _, err := testbed.Get(context.Background(), c, natURL+"/"); err != nil {
			t.Fatalf("request %d from the on-link router: %v", i, err)
		}
	}
	// A reply dropped for want of the MAC is retransmitted, and the
	// requests succeed all the same; the counters must show it.
	if v := testbed.Metric(e.settled(m), "vipd_drops_total", "reason", "no_neighbor"); v != 0 {
		t.Errorf("%v replies dropped for want of the client's MAC", v)
	}
}

// TestIPv6: IPv6 VIPs in NAT and DSR mode (6in6 to backends that
// decapsulate in user space), with neighbor discovery answered by vipd.
func TestIPv6(t *testing.T) {
	for _, io := range drivers {
		t.Run(io, func(t *testing.T) {
			e := setup(t, testbed.Options{IPv6: true}, testbed.ConfigOptions{IO: io, IPv6: true})
			const n = 150
			tuples := map[string]int{} // by VIP: distinct client ports (as in TestBalance, the kernel may reuse one)
			for _, vip := range []struct{ name, url string }{
				{"web6-nat", "http://[" + testbed.VIPNAT6.String() + "]"},
				{"web6-dsr", "http://[" + testbed.VIPDSR6.String() + "]"},
			} {
				dials := &dialLog{}
				e.c = &http.Client{
					Transport: &http.Transport{DialContext: dials.wrap(testbed.Dialer(e.bed.Client)), DisableKeepAlives: true},
					Timeout:   60 * time.Second,
				}
				checkShares(t, e.names(vip.url, n), map[string]int{"backend1": 1, "backend2": 1, "backend3": 1}, n)
				if _, err := e.download(vip.url, 16<<20); err != nil {
					t.Errorf("download from %s: %v", vip.url, err)
				}
				conns, distinct := dials.count()
				if conns < n+1 {
					t.Fatalf("%s: %d connections for %d requests and a download", vip.name, conns, n)
				}
				if distinct < conns {
					t.Logf("%s: the kernel reused client ports: %d connections from %d distinct ones", vip.name, conns, distinct)
				}
				tuples[vip.name] = distinct
			}
			for vip, want := range tuples {
				if v := e.eventually(func(v float64) bool { return v >= float64(want) }, "vipd_vip_new_flows_total", "vip", vip); v < float64(want) {
					t.Errorf("vipd counted %v new flows for %s, want at least %d (the distinct client ports; lookups: %v hits, %v misses; repicked %v, untracked %v; no backend %v)",
						v, vip, want, e.metric("vipd_flow_lookups_total", "result", "hit"), e.metric("vipd_flow_lookups_total", "result", "miss"),
						e.metric("vipd_flows_repicked_total"), e.metric("vipd_flows_untracked_total"), e.metric("vipd_drops_total", "reason", "no_backend"))
				}
			}
		})
	}
}

// dialLog records the local address of every connection a dialer makes.
type dialLog struct {
	mu    sync.Mutex
	conns int
	local map[string]bool
}

func (l *dialLog) wrap(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err == nil {
			l.mu.Lock()
			if l.local == nil {
				l.local = map[string]bool{}
			}
			l.conns++
			l.local[c.LocalAddr().String()] = true
			l.mu.Unlock()
		}
		return c, err
	}
}

// count returns the connections made and their distinct local addresses.
func (l *dialLog) count() (conns, distinct int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conns, len(l.local)
}

// TestFastPathDSREncap: with the fast path on, uploads through the DSR
// VIP in GUE and in IP in IP from a per-flow source arrive intact at the
// backends (whose vipd-decap takes the XDP program's outer headers apart),
// and most of the client's segments are forwarded by the fast path.
func TestFastPathDSREncap(t *testing.T) {
	for _, tc := range []struct{ name, keys string }{
		{"gue", "encap = \"gue\"\n"},
		{"ipip per-flow source", "encap_source_prefix = \"198.18.1.0/29\"\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t, testbed.Options{XDPPeers: true}, testbed.ConfigOptions{FastPath: "1s", DSREncap: tc.keys})
			sent := tcpOutSegs(t, e.bed.Client)
			if _, err := e.upload(dsrURL, 8<<20); err != nil {
				t.Fatalf("upload to the DSR VIP: %v", err)
			}
			segs := tcpOutSegs(t, e.bed.Client) - sent
			fast := e.eventually(func(v float64) bool { return v >= segs/2 }, "vipd_driver_events_total", "event", "fast_path_forwarded")
			t.Logf("the client sent %v segments, the fast path forwarded %v", segs, fast)
			if fast < segs/2 || fast > segs*1.02+200 {
				t.Errorf("the fast path forwarded %v of the client's %v segments, want from half to all", fast, segs)
			}
		})
	}
}

// TestFastPathIPv6: with the fast path on, an upload and a download
// through the IPv6 NAT VIP arrive intact, and most of both ends' segments
// (the client's translated to the backend, the backend's replies to the
// client, redirected between the interfaces) are forwarded by the fast
// path rather than by a worker; so are most of the client's segments of
// an upload through the IPv6 DSR VIP (IPv6 in IPv6, which the backends'
// vipd-decap takes apart).
func TestFastPathIPv6(t *testing.T) {
	e := setup(t, testbed.Options{IPv6: true, XDPPeers: true}, testbed.ConfigOptions{IPv6: true, FastPath: "1s"})
	const size = 16 << 20
	dsr := "http://[" + testbed.VIPDSR6.String() + "]"
	before := e.metric("vipd_driver_events_total", "event", "fast_path_forwarded")
	sent := tcpOutSegs(t, e.bed.Client)
	if _, err := e.upload(dsr, size/2); err != nil {
		t.Fatalf("upload to the DSR VIP: %v", err)
	}
	segs := tcpOutSegs(t, e.bed.Client) - sent
	enc := e.eventually(func(v float64) bool { return v-before >= segs/2 }, "vipd_driver_events_total", "event", "fast_path_forwarded") - before
	t.Logf("DSR upload: the client sent %v segments, the fast path forwarded %v", segs, enc)
	if enc < segs/2 || enc > segs*1.02+200 {
		t.Errorf("the fast path forwarded %v of the client's %v segments to the DSR VIP, want from half to all", enc, segs)
	}
	url := "http://[" + testbed.VIPNAT6.String() + "]"
	beforeFast := e.metric("vipd_driver_events_total", "event", "fast_path_forwarded")
	beforeClient, beforeBackends := tcpOutSegs(t, e.bed.Client), tcpOutSegs(t, e.backendNS()...)
	if _, err := e.upload(url, size); err != nil {
		t.Fatalf("upload: %v", err)
	}
	if _, err := e.download(url, size); err != nil {
		t.Fatalf("download: %v", err)
	}
	client, backends := tcpOutSegs(t, e.bed.Client)-beforeClient, tcpOutSegs(t, e.backendNS()...)-beforeBackends
	fast := e.eventually(func(v float64) bool { return v-beforeFast >= (client+backends)/2 },
		"vipd_driver_events_total", "event", "fast_path_forwarded") - beforeFast
	t.Logf("the client sent %v segments, the backends %v; the fast path forwarded %v", client, backends, fast)
	if fast < (client+backends)/2 || fast > (client+backends)*1.02 {
		t.Errorf("the fast path forwarded %v frames, want from half to all of the %v + %v segments of both ends", fast, client, backends)
	}
	if offered := e.metric("vipd_fast_path_offered_total"); offered == 0 {
		t.Error("no flow offered")
	}
}

// TestFastPathRenewal: a flow the fast path carries for several of its
// refreshes is handed down again about once a refresh in each direction,
// and otherwise stays in the kernel. The workers see the flow's
// handshake, its end, and per renewal the packet after the entry expired
// with the rest of its burst that arrives before the worker has written
// the entry again (the paced reader here opens the window 100 KB at a
// time: measured at about 30 frames a renewal), which the worker does
// not hand down again (offerRepeat: measured 361 hand-downs for 12
// refreshes before it, 23 after). The fast path forwards the rest, and
// the transfer completes, paced over about twelve refreshes.
func TestFastPathRenewal(t *testing.T) {
	const refresh = 250 * time.Millisecond
	e := setup(t, testbed.Options{XDPPeers: true}, testbed.ConfigOptions{FastPath: refresh.String()})
	if _, err := e.download(natURL, 1<<10); err != nil { // neighbours resolved, backends up
		t.Fatalf("first download: %v", err)
	}
	rx0, off0 := e.metric("vipd_rx_frames_total"), e.metric("vipd_fast_path_offered_total")
	fast0 := e.metric("vipd_driver_events_total", "event", "fast_path_forwarded")
	segs0 := tcpOutSegs(t, e.bed.Client) + tcpOutSegs(t, e.backendNS()...)
	start := time.Now()
	be := make(chan string, 1)
	if err := e.slowDownload(natURL, 6<<20, 2<<20, be); err != nil { // about 3 s
		t.Fatalf("paced download from %s: %v", <-be, err)
	}
	took := time.Since(start)
	segs := tcpOutSegs(t, e.bed.Client) + tcpOutSegs(t, e.backendNS()...) - segs0
	// The workers publish their counters every 100 ms, the fast path's
	// are harvested within a second: read them (from one scrape) until
	// what the workers took and the fast path forwarded accounts for the
	// segments, so that the hand-downs are all counted too.
	var rx, off, fast float64
	for deadline := time.Now().Add(patience); ; time.Sleep(50 * time.Millisecond) {
		fams, err := e.v.Metrics()
		if err != nil {
			t.Fatalf("metrics: %v", err)
		}
		rx = testbed.Metric(fams, "vipd_rx_frames_total") - rx0
		off = testbed.Metric(fams, "vipd_fast_path_offered_total") - off0
		fast = testbed.Metric(fams, "vipd_driver_events_total", "event", "fast_path_forwarded") - fast0
		if fast+rx >= segs*0.98 || time.Now().After(deadline) {
			break
		}
	}
	periods := float64(took / refresh)
	t.Logf("%v over %.0f refreshes: %v segments from both ends; the workers took %v frames and handed down %v flows, the fast path forwarded %v",
		took.Round(time.Millisecond), periods, segs, rx, off, fast)
	// Two flows (the client's, the backend's replies), each handed down
	// after its first packets and renewed at its first packet after each
	// expiry: one a period at most, fewer when a packet renews it late.
	if off < periods || off > 2*periods+8 {
		t.Errorf("%v flows handed down over %.0f refreshes of two flows, want one renewal a refresh and flow, give or take", off, periods)
	}
	// Without renewals the workers would take every frame after the
	// first refresh; without the entries, all.
	if rx > segs/4 || fast < segs*3/4 {
		t.Errorf("the workers took %v frames and the fast path forwarded %v of %v segments, want the fast path three quarters at least", rx, fast, segs)
	}
}

// TestFastPathAutoOnVeth: with the default fast_path ("auto") on the
// testbed's veths, vipd leaves the fast path off and says why, and
// forwards through the workers (the veths' peers run no XDP program, so
// frames the program sent would be lost).
func TestFastPathAutoOnVeth(t *testing.T) {
	e := setup(t, testbed.Options{}, testbed.ConfigOptions{})
	if _, err := e.upload(natURL, 1<<20); err != nil {
		t.Fatalf("upload: %v", err)
	}
	log := e.v.Log()
	if !strings.Contains(log, "XDP fast path off") || !strings.Contains(log, "is a veth") || strings.Contains(log, "XDP fast path on") {
		t.Errorf("the log does not say the fast path is off on a veth:\n%s", tail(log, 40))
	}
	if n := e.metric("vipd_driver_events_total", "event", "fast_path_forwarded"); n != 0 {
		t.Errorf("fast path forwarded %v frames", n)
	}
	if on := e.metric("vipd_fast_path_on"); on != 0 {
		t.Errorf("vipd_fast_path_on = %v, want 0", on)
	}
}

// TestFastPath: with the XDP fast path on, uploads and downloads through
// the NAT VIP and an upload through the DSR VIP (IPIP, decapsulated by the
// backends) arrive intact, in both layouts (XDP_TX one-armed, a redirect
// to the egress interface two-armed), and most of the client's segments,
// and of the NAT backend's replies (SNAT; two-armed, by the egress
// interface's program, redirected to the ingress one), are forwarded by
// the fast path, not by a worker, yet counted in the NAT VIP's packets.
func TestFastPath(t *testing.T) {
	for _, layout := range []struct {
		name string
		l    testbed.Layout
	}{{"two-armed", testbed.TwoArmed}, {"one-armed", testbed.OneArmed}} {
		t.Run(layout.name, func(t *testing.T) {
			e := setup(t, testbed.Options{Layout: layout.l, XDPPeers: true}, testbed.ConfigOptions{FastPath: "1s"})
			sent, sentBackends := tcpOutSegs(t, e.bed.Client), tcpOutSegs(t, e.backendNS()...)
			const size = 32 << 20
			// DSR's client half, encapsulated by the fast path.
			if _, err := e.upload(dsrURL, size/2); err != nil {
				t.Fatalf("upload to the DSR VIP: %v", err)
			}
			m := e.markNAT("web-nat", append(e.backendNS(), e.bed.Client)...)
			if _, err := e.upload(natURL, size); err != nil {
				t.Fatalf("upload: %v", err)
			}
			// The download: the backend's segments are NAT replies,
			// which the fast path translates too (SNAT), so it forwards
			// more than the client sends meanwhile.
			beforeFast := e.metric("vipd_driver_events_total", "event", "fast_path_forwarded")
			beforeClient, beforeBackends := tcpOutSegs(t, e.bed.Client), tcpOutSegs(t, e.backendNS()...)
			if _, err := e.download(natURL, size); err != nil {
				t.Fatalf("download: %v", err)
			}
			client, backends := tcpOutSegs(t, e.bed.Client)-beforeClient, tcpOutSegs(t, e.backendNS()...)-beforeBackends
			down := e.eventually(func(v float64) bool { return v-beforeFast >= (client+backends)/2 },
				"vipd_driver_events_total", "event", "fast_path_forwarded") - beforeFast
			t.Logf("download: the client sent %v segments, the backends %v; the fast path forwarded %v", client, backends, down)
			if down < (client+backends)/2 || down <= client || down > (client+backends)*1.02 {
				t.Errorf("the fast path forwarded %v frames during the download, want from half to all of the %v + %v segments of both ends, and more than the client's",
					down, client, backends)
			}
			// The client's segments all went to the VIP (the client
			// sends nothing else, and no TSO: one count per frame); the
			// NAT backend's, through the box too.
			segs, backendSegs := tcpOutSegs(t, e.bed.Client)-sent, tcpOutSegs(t, e.backendNS()...)-sentBackends
			fast := e.eventually(func(v float64) bool { return v >= segs/2 }, "vipd_driver_events_total", "event", "fast_path_forwarded")
			offered, errs := e.metric("vipd_fast_path_offered_total"), e.metric("vipd_fast_path_flush_errors_total")
			t.Logf("the client sent %v segments; the fast path forwarded %v (%v during the download); workers offered %v flows", segs, fast, down, offered)
			// Not more than the client and the backends sent, give or
			// take: OutSegs lags the wire by the segments sent after the
			// counters were read (the last ACKs, FIN), measured at up
			// to 190.
			if fast < segs/2 || fast > (segs+backendSegs)*1.02 {
				t.Errorf("the fast path forwarded %v frames; the client sent %v segments, the backends %v", fast, segs, backendSegs)
			}
			if offered == 0 || errs != 0 {
				t.Errorf("%v flows offered, %v flush errors", offered, errs)
			}
			if st, err := e.v.State(); err != nil || !st.FastPath || e.metric("vipd_fast_path_on") != 1 {
				t.Errorf("state and metric do not say the fast path runs: %v", err)
			}
			// The VIP's packet counter covers what the fast path
			// forwarded too: it reaches what the ends received.
			e.settled(m)
		})
	}
}
