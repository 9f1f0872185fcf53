package rig

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/testing/nstest"
)

func TestVIPDConfigIsValid(t *testing.T) {
	for _, io := range []string{"afxdp", "afpacket"} {
		cfg, _, err := config.Parse("rig.toml", []byte(VIPDConfig(io, 2)))
		if err != nil {
			t.Fatalf("%s: %v\n%s", io, err, VIPDConfig(io, 2))
		}
		if len(cfg.VIPs) != 2 || cfg.Dataplane.Queues != 2 || string(cfg.Dataplane.IO) != io {
			t.Errorf("%s: parsed %+v", io, cfg.Dataplane)
		}
	}
	src := VIPDConfig("afxdp", 1, "busy_poll_usecs = 50")
	cfg, _, err := config.Parse("rig.toml", []byte(src))
	if err != nil {
		t.Fatalf("with busy polling: %v\n%s", err, src)
	}
	if cfg.Dataplane.BusyPollUsecs != 50 {
		t.Errorf("busy_poll_usecs %d, want 50", cfg.Dataplane.BusyPollUsecs)
	}
}

func TestTrafficConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tr      Traffic
		want    []string
		notWant []string
		flows   int
	}{
		{"many flows", Traffic{DstMAC: "02:00:00:00:00:02", Dst: VIPNAT, DstPort: VIPPort},
			[]string{"da=02:00:00:00:00:02", "da=198.18.0.100", "dp=7000", "dinc(1, 63)", "dinc(10000, 11023)", "fill(0x00, 18)"}, nil, 64512},
		{"one flow", Traffic{DstMAC: "02:00:00:00:00:02", Dst: VIPDSR, DstPort: VIPPort, OneFlow: true},
			[]string{"sa=198.18.2.1,", "da=198.18.0.101", "sp=10000,", "dp=7000", "fill(0x00, 18)"}, []string{"dinc"}, 1},
	} {
		c := tc.tr.Config()
		for _, w := range tc.want {
			if !strings.Contains(c, w) {
				t.Errorf("%s: trafgen config lacks %q: %s", tc.name, w, c)
			}
		}
		for _, w := range tc.notWant {
			if strings.Contains(c, w) {
				t.Errorf("%s: trafgen config has %q: %s", tc.name, w, c)
			}
		}
		if got := tc.tr.FlowCount(); got != tc.flows {
			t.Errorf("%s: FlowCount %d, want %d", tc.name, got, tc.flows)
		}
	}
	// The two dinc fields step together: the flows are lcm(clients,
	// ports), which is their product only when they are coprime.
	gcd := func(a, b int) int {
		for b != 0 {
			a, b = b, a%b
		}
		return a
	}
	if FrameLen != 60 || Flows != Clients*SourcePorts || gcd(Clients, SourcePorts) != 1 {
		t.Errorf("FrameLen %d, Flows %d, gcd(%d, %d) = %d", FrameLen, Flows, Clients, SourcePorts, gcd(Clients, SourcePorts))
	}
}

func TestScope(t *testing.T) {
	var order []string
	root := &Scope{}
	root.Cleanup(func() { order = append(order, "root") })
	child := root.Child()
	child.Cleanup(func() { order = append(order, "child1") })
	child.Cleanup(func() { order = append(order, "child2") })
	err := Try(func() { child.Fatalf("boom %d", 1) })
	var f *Failure
	if !errors.As(err, &f) || f.Msg != "boom 1" {
		t.Fatalf("Try = %v", err)
	}
	root.Close()
	if got := strings.Join(order, ","); got != "child2,child1,root" {
		t.Errorf("cleanup order %s", got)
	}
	ran := false
	root.Cleanup(func() { ran = true })
	if !ran {
		t.Error("a cleanup registered on a closed scope must run at once")
	}
}

// TestRigSmoke runs the two scenarios that need no vipd build (the ceiling
// and Linux forwarding) for one short window each and checks that packets
// arrived and that no namespace of this process is left.
func TestRigSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the rig runs in make bench")
	}
	nstest.RequireRoot(t)
	for _, tool := range []string{"trafgen", "taskset"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (make bench installs netsniff-ng)", tool)
		}
	}
	scope := &Scope{}
	defer scope.Close()
	o := Options{Window: 500 * time.Millisecond, Reps: 1, Warmup: 300 * time.Millisecond, Dir: t.TempDir()}
	for _, sc := range Scenarios()[:2] {
		res, _ := Run(scope, sc, o)
		if res.Err != "" {
			t.Fatalf("%s: %s", sc.Name, res.Err)
		}
		// Packets arrived, and no more than were sent: how many is for
		// make bench to say, not for a smoke test on a busy machine.
		if res.Forwarded.Median < 1_000 || res.Offered.Median < res.Forwarded.Median*0.9 {
			t.Errorf("%s: forwarded %.0f pps, offered %.0f pps", sc.Name, res.Forwarded.Median, res.Offered.Median)
		}
	}
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	if pid := strconv.Itoa(os.Getpid()); strings.Contains(string(out), pid) {
		t.Errorf("namespaces of this run left behind:\n%s", out)
	}
}
