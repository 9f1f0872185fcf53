package e2e

import (
	"strings"
	"testing"

	"github.com/vipd/vipd/internal/offload"
	"github.com/vipd/vipd/testing/testbed"
	"github.com/vipd/vipd/testing/testkit"
)

// TestVIPIsBoxAddress: a VIP address that is also one of the box's own
// would take every packet to that address — SSH and BGP to the box
// included — away from the kernel, whatever its port. vipd refuses to
// start with such a VIP, with either driver, and says what to change.
func TestVIPIsBoxAddress(t *testing.T) {
	for _, io := range drivers {
		t.Run(io, func(t *testing.T) {
			requireE2E(t)
			bed := testbed.New(t, testbed.Options{})
			// A second interface of the box, not vipd's, holds the VIP.
			bed.Box.Must(t, "ip", "link", "add", "vipdummy0", "type", "bridge")
			bed.Box.Must(t, "ip", "addr", "add", testbed.VIPNAT.String()+"/32", "dev", "vipdummy0")
			out, err := bed.RunVIPDExpectExit(bed.Config(testbed.ConfigOptions{IO: io}), 2*patience)
			if err == nil {
				t.Fatalf("vipd started with a VIP that is a box address:\n%s", out)
			}
			// AF_PACKET's host check (which also refuses a forwarding box)
			// finds it first and says it its own way.
			why := strings.Contains(out, "one of the box's own addresses") || strings.Contains(out, "assigned to a local interface")
			if !why || !strings.Contains(out, testbed.VIPNAT.String()) {
				t.Errorf("the refusal does not say which address and why:\n%s", out)
			}
		})
	}
}

// TestTxOffloadWarning: when the veth that sends toward vipd has TX
// checksum offload on (a local container's, say), vipd says so at start,
// with the command that turns it off.
func TestTxOffloadWarning(t *testing.T) {
	requireE2E(t)
	bed := testbed.New(t, testbed.Options{Layout: testbed.TwoArmed})
	// r1 is the router's end of the box's eth0.
	if err := bed.Router.Do(func() error { return offload.SetTxChecksum("r1", true) }); err != nil {
		t.Fatal(err)
	}
	v := bed.StartVIPD(bed.Config(testbed.ConfigOptions{}))
	if !testkit.Poll(patience, func() bool { return strings.Contains(v.Log(), "vipd running") }) {
		t.Fatalf("vipd not running after %v:\n%s", patience, tail(v.Log(), 30))
	}
	log := v.Log()
	if !strings.Contains(log, "TX checksum offload") || !strings.Contains(log, "ethtool -K r1 tx off") {
		t.Errorf("no warning about r1's TX checksum offload:\n%s", tail(log, 30))
	}
	if strings.Contains(log, "eth1") && strings.Contains(log, "ethtool -K r2 tx off") {
		t.Errorf("a warning about r2, whose offload is off:\n%s", tail(log, 30))
	}
}
