package rig

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/config"
	"github.com/vipd/vipd/internal/nstest"
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
}

func TestTrafficConfig(t *testing.T) {
	c := Traffic{DstMAC: "02:00:00:00:00:02", Dst: VIPNAT, DstPort: VIPPort}.Config()
	for _, want := range []string{"da=02:00:00:00:00:02", "da=198.18.0.100", "dp=7000", "dinc(1, 63)", "dinc(10000, 10999)", "fill(0x00, 18)"} {
		if !strings.Contains(c, want) {
			t.Errorf("trafgen config lacks %q: %s", want, c)
		}
	}
	if FrameLen != 60 || Flows != 63000 {
		t.Errorf("FrameLen %d, Flows %d", FrameLen, Flows)
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
		if res.Forwarded.Median < 10_000 || res.Offered.Median < res.Forwarded.Median*0.9 {
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
