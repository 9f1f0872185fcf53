package e2e

import (
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/testing/testbed"
	"github.com/vipd/vipd/testing/testbed/quicflow"
)

// QUIC-LB end to end, which keeps a QUIC connection on its backend when
// the client's address changes: quic-go servers on the backends issue
// QUIC-LB connection IDs (testbed/quicbackend), quic-go clients stream
// both ways with every byte checked (testbed/quicflow), through a NAT and
// a DSR QUIC VIP. Every backend shares a stateless reset key, so a
// connection that reaches a server that does not hold it is reset there
// and then: a misrouted connection breaks visibly.

// quicFlows is how many connections each scenario streams.
const quicFlows = 24

// quicVIPs are the bed's two QUIC VIPs: quic-nat at VIPUDP:QUICPort and
// quic-dsr at VIPDSR:QUICDSRPort, over n backends, QUIC-LB on or off.
func quicVIPs(n int, on bool, configs ...testbed.QUICConfig) string {
	return testbed.QUICVIP("quic-nat", testbed.VIPUDP.String(), "nat", n, on, configs...) +
		testbed.QUICVIP("quic-dsr", testbed.VIPDSR.String(), "dsr", n, on, configs...)
}

// askWait bounds quicflow's Changed: a new stream's round trip to the
// server, asking its name.
const askWait = 5 * time.Second

// quicAddr is the address clients dial for a QUIC VIP.
func quicAddr(mode string) netip.AddrPort {
	if mode == "dsr" {
		return netip.AddrPortFrom(testbed.VIPDSR, testbed.QUICDSRPort)
	}
	return netip.AddrPortFrom(testbed.VIPUDP, testbed.QUICPort)
}

// startQUICBackends runs every backend's QUIC server with configs.
func startQUICBackends(bed *testbed.Bed, configs ...testbed.QUICConfig) {
	for i, be := range bed.Backends {
		be.StartQUIC(i, testbed.VIPDSR.String(), configs...)
	}
}

// startQUIC starts n flows to the VIP of mode, failing t if they do not.
func startQUIC(t *testing.T, bed *testbed.Bed, mode string, n int) *quicflow.Flows {
	t.Helper()
	var fs *quicflow.Flows
	// The servers may still be starting: the first handshake retries.
	waitFor(t, patience, "QUIC flows start", func() bool {
		var err error
		fs, err = quicflow.Start(bed.Client, quicAddr(mode), n)
		if err != nil {
			t.Logf("%v (retrying)", err)
		}
		return err == nil
	})
	t.Cleanup(fs.Finish)
	return fs
}

// TestQUICAddressChange: mid-stream every client's address changes, by
// voluntary migration and by NAT rebinding, through the NAT and the DSR
// VIP. With QUIC-LB every connection survives. With it off (the same
// servers, the same IDs, vipd routing by the 4-tuple) a connection
// survives only if its new tuple happens to hash to its own server: the
// test requires that some die, or it would prove nothing, and logs how
// many.
func TestQUICAddressChange(t *testing.T) {
	cfg := testbed.QUICConfig{Rotation: 0, NonceLen: 6}
	for _, mode := range []string{"nat", "dsr"} {
		t.Run(mode, func(t *testing.T) {
			e := setup(t, testbed.Options{}, testbed.ConfigOptions{Extra: quicVIPs(3, true, cfg)})
			startQUICBackends(e.bed, cfg)
			for _, on := range []bool{true, false} {
				if err := e.v.Reload(e.bed.Config(testbed.ConfigOptions{Extra: quicVIPs(3, on, cfg)}), "ok"); err != nil {
					t.Fatal(err)
				}
				for _, how := range []string{"migrate", "rebind"} {
					fs := startQUIC(t, e.bed, mode, quicFlows)
					var failed []string
					switch how {
					case "migrate":
						failed = fs.Migrate(10 * time.Second)
					case "rebind":
						if err := fs.Rebind(); err != nil {
							t.Fatal(err)
						}
					}
					broken := append(failed, fs.Settle(settleWait)...)
					t.Logf("QUIC-LB %s, %s, %s: %d of %d connections broken (backends %v)", onOff(on), mode, how, len(broken), fs.Len(), fs.Backends())
					switch {
					case on && len(broken) > 0:
						t.Errorf("QUIC-LB on, %s: %d broken:\n  %s", how, len(broken), testbed.FirstN(broken, 5))
					case !on && len(broken) == 0:
						t.Errorf("QUIC-LB off, %s: no connection broke, so the test shows nothing", how)
					}
					if on {
						if changed := fs.Changed(askWait); len(changed) > 0 {
							t.Errorf("QUIC-LB on, %s: %d connections changed backends:\n  %s", how, len(changed), testbed.FirstN(changed, 5))
						}
					}
					fs.Finish()
				}
			}
			if got := e.metric("vipd_quic_lb_routed_total", "what", "packets"); got == 0 {
				t.Error("no packet was routed by its connection ID")
			}
		})
	}
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// TestQUICRotation: the servers move from configuration 0 (plaintext) to
// configuration 1 (keyed, the Feistel network) while vipd routes both.
// The clients of before the move hold IDs of configuration 0; they
// migrate until they send with IDs of configuration 1 (each migration
// takes a spare ID and retires one, which the server replaces with an ID
// of configuration 1). Then configuration 0 leaves vipd while they and
// clients of after the move stream on, and they all migrate once more:
// none breaks.
func TestQUICRotation(t *testing.T) {
	e := setup(t, testbed.Options{}, testbed.ConfigOptions{})
	c0 := testbed.QUICConfig{Rotation: 0, NonceLen: 6}
	c1 := testbed.QUICConfig{Rotation: 1, NonceLen: 6, KeyFile: e.bed.QUICKeyFile(1)}
	reload := func(configs ...testbed.QUICConfig) {
		t.Helper()
		if err := e.v.Reload(e.bed.Config(testbed.ConfigOptions{Extra: quicVIPs(3, true, configs...)}), "ok"); err != nil {
			t.Fatal(err)
		}
	}
	reload(c0, c1) // vipd first: both configurations
	startQUICBackends(e.bed, c0, c1)
	old := startQUIC(t, e.bed, "nat", quicFlows)
	if got := old.Rotations(); got[0] != quicFlows {
		t.Fatalf("before the switch the clients send with IDs of configurations %v, want all of 0", got)
	}
	for _, be := range e.bed.Backends {
		if err := os.WriteFile(be.QUICSwitchFile(), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, be := range e.bed.Backends {
		waitFor(t, patience, be.Name+" switches", func() bool { return strings.Contains(e.bed.Log("quic-"+be.Name), "switched") })
	}
	young := startQUIC(t, e.bed, "nat", quicFlows)
	if got := young.Rotations(); got[1] != quicFlows {
		t.Fatalf("after the switch new clients send with IDs of configurations %v, want all of 1", got)
	}
	both := []*quicflow.Flows{old, young}
	// migrate moves every flow to a new path and waits for a round on
	// it, so that Rotations sees the ID the new path uses.
	migrate := func() (broken []string) {
		for _, fs := range both {
			broken = append(broken, fs.Migrate(10*time.Second)...)
		}
		for _, fs := range both {
			broken = append(broken, fs.Settle(settleWait)...)
		}
		return broken
	}
	// quic-go holds at most 4 of the server's IDs, so 4 migrations use
	// up those of configuration 0; 8 is the bound.
	var broken []string
	moves := 0
	for ; moves < 8 && old.Rotations()[1] < quicFlows && len(broken) == 0; moves++ {
		broken = migrate()
	}
	t.Logf("rotation, both configurations live: %d migrations, IDs in use by configuration %v, %d of %d connections broken", moves, old.Rotations(), len(broken), 2*quicFlows)
	if len(broken) > 0 {
		t.Fatalf("%d broken:\n  %s", len(broken), testbed.FirstN(broken, 5))
	}
	if got := old.Rotations(); got[1] != quicFlows {
		t.Fatalf("after %d migrations the old clients send with IDs of configurations %v, want all of 1", moves, got)
	}
	reload(c1)
	broken = migrate()
	t.Logf("rotation, configuration 0 gone: %d of %d connections broken", len(broken), 2*quicFlows)
	if len(broken) > 0 {
		t.Errorf("%d broken after configuration 0 left:\n  %s", len(broken), testbed.FirstN(broken, 5))
	}
	for _, fs := range both {
		if changed := fs.Changed(askWait); len(changed) > 0 {
			t.Errorf("%d connections changed backends:\n  %s", len(changed), testbed.FirstN(changed, 5))
		}
	}
}

// TestQUICChurn: on the three-box ECMP bed, QUIC-LB on and previous-owner
// forwarding off, streaming QUIC connections through the DSR VIP while a
// fourth backend is added and then a box is silenced (its flows move to
// the others, which never saw them): none breaks. The server ID in every
// packet is all a box needs.
func TestQUICChurn(t *testing.T) {
	cfg := testbed.QUICConfig{Rotation: 0, NonceLen: 6}
	co := testbed.ConfigOptions{Health: testbed.FastHealth, Echo: true, Backends: 3, Extra: quicVIPs(3, true, cfg)}
	e := newECMPEnv(t, testbed.Options{Backends: 4}, co)
	for i, be := range e.bed.Backends {
		be.StartQUIC(i, testbed.VIPDSR.String(), cfg)
	}
	fs := startQUIC(t, e.bed.Bed, "dsr", 3*quicFlows)
	t.Logf("%d QUIC connections on backends %v", fs.Len(), fs.Backends())
	e.co.Backends, e.co.Extra = 4, quicVIPs(4, true, cfg)
	e.reloadAll(t)
	if broken := fs.Settle(settleWait); len(broken) > 0 {
		t.Fatalf("adding a backend broke %d connections:\n  %s", len(broken), testbed.FirstN(broken, 5))
	}
	e.silence(t, 1)
	waitHops(t, e.bed.Bed, testbed.VIPDSR, e.boxesBut(1), 15*time.Second, "box 2 silent")
	broken := fs.Settle(settleWait)
	t.Logf("QUIC CHURN: backend added, then a box silenced: %d of %d connections broken", len(broken), fs.Len())
	if len(broken) > 0 {
		t.Errorf("%d broken:\n  %s", len(broken), testbed.FirstN(broken, 5))
	}
	if changed := fs.Changed(askWait); len(changed) > 0 {
		t.Errorf("%d connections changed backends:\n  %s", len(changed), testbed.FirstN(changed, 5))
	}
	var routed float64
	for i, v := range e.boxes {
		if i == 1 {
			continue
		}
		fams, err := v.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		routed += testbed.Metric(fams, "vipd_quic_lb_routed_total", "what", "packets")
	}
	if routed == 0 {
		t.Error("the boxes routed no packet by its connection ID")
	}
}
