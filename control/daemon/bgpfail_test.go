package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/vipd/vipd/dataplane"
	"github.com/vipd/vipd/testing/testkit"
)

// grRouter is a GoBGP server on loopback playing an upstream router that
// helps graceful restart: when vipd's session closes without a
// NOTIFICATION it keeps vipd's routes (stale) until the next session's
// End-of-RIB, and drops them at once after a CEASE. It records what its
// session with vipd and its best path to one prefix go through.
type grRouter struct {
	srv  *server.BgpServer
	port int
	vip  string // the prefix watched, as GoBGP prints it

	mu     sync.Mutex
	events []string // "established", "down", "route", "withdrawn", "eor", in order
	// held and stale are the router's best path to the prefix, from its
	// events (ListPath would race with GoBGP's own staling of paths).
	held, stale bool
	// established are the sessions' starts, each with whether vipd's
	// workers were running then (onEstablished says).
	running []bool
	// onEstablished, when set, tells whether vipd's workers run.
	onEstablished func() bool
	// close stops the router (once; also at the test's cleanup).
	close func()
}

func startGRRouter(t *testing.T, vip netip.Prefix) *grRouter {
	t.Helper()
	port, err := strconv.Atoi(closedLoopbackPort(t)) // nothing listens there yet
	if err != nil {
		t.Fatal(err)
	}
	r := &grRouter{srv: server.NewBgpServer(server.LoggerOption(slog.New(slog.DiscardHandler), &slog.LevelVar{})), port: port, vip: vip.String()}
	go r.srv.Serve()
	ctx := context.Background()
	if err := r.srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn: 65000, RouterId: "198.18.0.253", ListenPort: int32(port), ListenAddresses: []string{"127.0.0.1"},
	}}); err != nil {
		t.Fatal(err)
	}
	fam := &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
	if err := r.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: &api.Peer{
		Conf:            &api.PeerConf{NeighborAddress: "127.0.0.1", PeerAsn: 65010},
		Transport:       &api.Transport{PassiveMode: true},
		GracefulRestart: &api.GracefulRestart{Enabled: true, HelperOnly: true, RestartTime: 60},
		AfiSafis: []*api.AfiSafi{{
			Config:            &api.AfiSafiConfig{Family: fam, Enabled: true},
			MpGracefulRestart: &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}},
		}},
	}}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	if err := r.srv.WatchEvent(wctx, server.WatchEventMessageCallbacks{
		OnBestPath: func(paths []*apiutil.Path, _ time.Time) {
			for _, p := range paths {
				if p.Nlri.String() != r.vip {
					continue
				}
				r.mu.Lock()
				// A path going stale is no new route.
				if p.Withdrawal || !p.Stale {
					r.events = append(r.events, map[bool]string{false: "route", true: "withdrawn"}[p.Withdrawal])
				}
				r.held, r.stale = !p.Withdrawal, p.Stale
				r.mu.Unlock()
			}
		},
		OnPathEor: func(p *apiutil.Path, _ time.Time) {
			if p.Family == bgppkt.RF_IPv4_UC {
				r.record("eor")
			}
		},
		OnPeerUpdate: func(ev *apiutil.WatchEventMessage_PeerEvent, _ time.Time) {
			if ev.Type != apiutil.PEER_EVENT_STATE {
				return
			}
			switch ev.Peer.State.SessionState {
			case bgppkt.BGP_FSM_ESTABLISHED:
				r.mu.Lock()
				running := r.onEstablished != nil && r.onEstablished()
				r.running = append(r.running, running)
				r.events = append(r.events, "established")
				r.mu.Unlock()
			case bgppkt.BGP_FSM_IDLE:
				r.record("down")
			}
		},
	}, server.WatchBestPath(false), server.WatchEor(false), server.WatchPeer()); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	r.close = func() {
		once.Do(func() {
			cancel()
			r.srv.StopBgp(context.Background(), &api.StopBgpRequest{})
			r.srv.Stop()
		})
	}
	t.Cleanup(r.close)
	return r
}

// grRacy is why a test whose router keeps a restarting vipd's routes
// cannot run under the race detector.
const grRacy = "GoBGP v4.8.0 races with itself when a graceful-restart helper marks paths stale while its event watcher converts them (Path.MarkStale against toPathApiUtil's IsStale): not vipd's code, and vipd watches no paths"

func (r *grRouter) record(ev string) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

// log returns the events so far.
func (r *grRouter) log() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

func (r *grRouter) count(ev string) int {
	n := 0
	for _, e := range r.log() {
		if e == ev {
			n++
		}
	}
	return n
}

// has reports whether the router's table holds the prefix, and whether
// that copy is stale (kept for a restarting peer).
func (r *grRouter) has(t *testing.T) (has, stale bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held, r.stale
}

// grConfig is a NAT VIP with two backends announced over BGP to the
// router at port, with graceful restart and no lame duck on stop: a clean
// stop hands the route over to the router's graceful restart.
func grConfig(port int) string {
	return `
[dataplane]
ingress = "eth0"
egress = "eth1"
queues = 2
[admin]
listen = "127.0.0.1:0"
socket = "@SOCKET@"
[[vip]]
name = "web"
address = "198.18.0.100"
port = 80
[vip.healthcheck]
type = "none"
[[vip.backend]]
address = "198.18.1.11"
port = 8080
[[vip.backend]]
address = "198.18.1.12"
port = 8080
[bgp]
asn = 65010
router_id = "198.18.1.1"
graceful_restart = "60s"
drain_on_stop = false
[[bgp.peer]]
address = "127.0.0.1"
asn = 65000
families = ["ipv4"] # what the router enables
port = ` + strconv.Itoa(port) + "\n"
}

var grVIP = netip.MustParsePrefix("198.18.0.100/32")

// TestBGPNoSessionBeforeRunning starts vipd with a backend whose next hop
// never resolves, so that the start waits for it (here 4 s, longer than
// GoBGP takes to bring a session up) while host changes are published.
// The session must come up only once the workers run, and with the
// route: End-of-RIB after it. A session up during the wait would give the
// router an empty table and End-of-RIB, and a router that kept vipd's
// route through a graceful restart drops it then.
func TestBGPNoSessionBeforeRunning(t *testing.T) {
	r := startGRRouter(t, grVIP)
	td := newTestDaemon(t, grConfig(r.port), nil)
	td.d.hostWait = 4 * time.Second
	r.mu.Lock()
	r.onEstablished = func() bool {
		select {
		case <-td.d.Running():
			return true
		default:
			return false
		}
	}
	r.mu.Unlock()
	resolve := td.plat.host.NextHop
	td.plat.host.NextHop = func(a netip.Addr) ([6]byte, bool) {
		if a == netip.MustParseAddr("198.18.1.12") {
			return [6]byte{}, false // never answers ARP
		}
		return resolve(a)
	}
	td.run()
	testkit.Eventually(t, testkit.Patience, "the session's End-of-RIB", func() bool { return r.count("eor") > 0 })
	r.mu.Lock()
	running := append([]bool(nil), r.running...)
	r.mu.Unlock()
	if len(running) == 0 || !running[0] {
		t.Errorf("the session came up before vipd's workers ran (sessions: running %v)", running)
	}
	ev := strings.Join(r.log(), " ")
	if !strings.HasPrefix(ev, "established route eor") {
		t.Errorf("the router saw %q, want the session, then the route, then End-of-RIB", ev)
	}
	r.close() // before vipd's graceful stop: see grRacy
}

// failQueue fails Receive once fail is set, like a driver that broke.
type failQueue struct {
	dataplane.Queue
	fail *atomic.Bool
}

func (q failQueue) Receive(descs []dataplane.Desc, timeout time.Duration) (int, error) {
	if q.fail.Load() {
		return 0, errors.New("the queue broke")
	}
	return q.Queue.Receive(descs, timeout)
}

// TestBGPFatalExitWithdraws: when vipd fails — a worker's queue or the
// platform gives up — it ends its BGP session with a CEASE, so that a
// router that helps graceful restart drops the route at once instead of
// keeping it for graceful_restart (60 s here) while the box forwards
// nothing. A clean stop, by contrast, leaves the route stale at the router.
func TestBGPFatalExitWithdraws(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(td *testDaemon, queue *atomic.Bool)
		err  string // in Run's error
	}{
		{"worker", func(_ *testDaemon, queue *atomic.Bool) { queue.Store(true) }, "the queue broke"},
		{"platform", func(td *testDaemon, _ *atomic.Bool) { td.plat.runErr <- errors.New("the netlink socket broke") }, "the netlink socket broke"},
		{"clean stop", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.fail == nil && raceDetector {
				t.Skip(grRacy)
			}
			r := startGRRouter(t, grVIP)
			td := newTestDaemon(t, grConfig(r.port), nil)
			logs := td.logTo()
			var broken atomic.Bool
			td.plat.wrap = func(i int, q dataplane.Queue) dataplane.Queue {
				if i == 1 {
					return failQueue{q, &broken}
				}
				return q
			}
			td.plat.runErr = make(chan error, 1)
			td.run()
			td.waitRunning()
			testkit.Eventually(t, testkit.Patience, "the route at the router", func() bool { has, stale := r.has(t); return has && !stale })
			if tc.fail == nil {
				if err := td.stop(); err != nil {
					t.Fatal(err)
				}
				testkit.Eventually(t, testkit.Patience, "the session down", func() bool { return r.count("down") > 0 })
				if has, _ := r.has(t); !has || r.count("withdrawn") != 0 {
					t.Errorf("after a clean stop the router's route: held %v, events %v; want it kept", has, r.log())
				}
				return
			}
			tc.fail(td, &broken)
			select {
			case err := <-td.done:
				td.cancel() // Run returned on its own
				td.cancel = nil
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Run returned %v, want the failure %q", err, tc.err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("vipd did not stop on the failure")
			}
			testkit.Eventually(t, testkit.Patience, "the route withdrawn at the router", func() bool { has, _ := r.has(t); return !has })
			if n := r.count("withdrawn"); n != 1 {
				t.Errorf("the router withdrew the route %d times, want 1", n)
			}
			if got := logs.lines(`msg="vipd fails: ending the BGP sessions with a CEASE`, tc.err); len(got) != 1 {
				t.Errorf("%d log entries say the sessions end with a CEASE, want 1:\n%s", len(got), logs)
			}
		})
	}
}

// TestFailureWithoutBGP: a box without [bgp] that fails (its interfaces
// deleted, say: the platform gives up) logs why, and nothing about BGP
// sessions it never had.
func TestFailureWithoutBGP(t *testing.T) {
	td := newTestDaemon(t, testConfig, nil)
	logs := td.logTo()
	td.plat.runErr = make(chan error, 1)
	td.run()
	td.waitRunning()
	td.plat.runErr <- errors.New("link eth0 deleted")
	select {
	case err := <-td.done:
		td.cancel() // Run returned on its own
		td.cancel = nil
		if err == nil || !strings.Contains(err.Error(), "link eth0 deleted") {
			t.Fatalf("Run returned %v, want the failure", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("vipd did not stop on the failure")
	}
	if got := logs.lines(`level=ERROR msg="vipd fails"`, "link eth0 deleted"); len(got) != 1 {
		t.Errorf("%d log entries say why vipd fails, want 1:\n%s", len(got), logs)
	}
	if got := logs.lines("BGP"); len(got) != 0 {
		t.Errorf("a box without [bgp] logs about BGP:\n%s", strings.Join(got, "\n"))
	}
}

// TestStallWithdrawsAndUnready: a worker that makes no progress withdraws
// the box's routes and fails readiness (the systemd watchdog is not the
// only one to hear of it: a box run without it, or a stall shorter than
// WatchdogSec, still stops drawing traffic); when it moves again, the
// route comes back and vipd is ready again. The session stays up.
func TestStallWithdrawsAndUnready(t *testing.T) {
	r := startGRRouter(t, grVIP)
	td := newTestDaemon(t, grConfig(r.port), nil)
	// A second: an idle worker starts a loop iteration every 10 ms (the
	// tests' poll timeout), a busy machine may delay it some.
	td.d.stallAfter = time.Second
	var stalled atomic.Bool
	t.Cleanup(func() { stalled.Store(false) }) // runs before the daemon stops
	td.plat.wrap = func(i int, q dataplane.Queue) dataplane.Queue {
		if i == 1 {
			return stallQueue{q, &stalled}
		}
		return q
	}
	td.run()
	td.waitRunning()
	announced := func() bool { has, stale := r.has(t); return has && !stale }
	testkit.Eventually(t, testkit.Patience, "the route at the router", announced)
	if err := td.d.Ready(); err != nil {
		t.Fatalf("Ready before the stall: %v", err)
	}

	stalled.Store(true)
	testkit.Eventually(t, testkit.Patience, "the route withdrawn for the stall", func() bool { has, _ := r.has(t); return !has })
	if err := td.d.Ready(); err == nil || !strings.Contains(err.Error(), "no progress") {
		t.Errorf("Ready while worker 1 stalls: %v, want an error that says so", err)
	}
	// (State would wait for the stalled worker's flow count.)
	td.d.mu.Lock()
	why := td.d.announceNameLocked(&td.d.cfg.VIPs[0])
	td.d.mu.Unlock()
	if !strings.Contains(why, "workers [1] make no progress") {
		t.Errorf("the VIP's announce while stalled: %q", why)
	}
	if m := td.d.Metrics(); m.WorkersStalled != 1 || m.WorkerStalls != 1 {
		t.Errorf("metrics: %d workers stalled, %d stalls; want 1 and 1", m.WorkersStalled, m.WorkerStalls)
	}

	stalled.Store(false)
	testkit.Eventually(t, testkit.Patience, "the route announced again", announced)
	testkit.Eventually(t, testkit.Patience, "ready again", func() bool { return td.d.Ready() == nil })
	if m := td.d.Metrics(); m.WorkersStalled != 0 {
		t.Errorf("metrics after the stall: %d workers stalled, want 0", m.WorkersStalled)
	}
	if n := r.count("down"); n != 0 {
		t.Errorf("the session went down %d times during the stall, want it kept", n)
	}
	r.close() // before vipd's graceful stop: see grRacy
}
