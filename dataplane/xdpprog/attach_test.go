package xdpprog

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/vipd/vipd/testing/nstest"
	"github.com/vipd/vipd/testing/testkit"
)

// xdpState is what `ip -d -j link` reports about an interface's XDP
// attachment: mode 0 none, 1 driver, 2 generic (XDP_ATTACHED_*).
type xdpState struct {
	Mode int
	Prog uint32
}

func xdp(t testing.TB, n *nstest.NS, dev string) xdpState {
	t.Helper()
	var links []struct {
		XDP *struct {
			Mode int `json:"mode"`
			Prog *struct {
				ID uint32 `json:"id"`
			} `json:"prog"`
		} `json:"xdp"`
	}
	out := n.Must(t, "ip", "-d", "-j", "link", "show", "dev", dev)
	if err := json.Unmarshal([]byte(out), &links); err != nil || len(links) != 1 {
		t.Fatalf("ip -d -j link show dev %s: %v: %s", dev, err, out)
	}
	var s xdpState
	if x := links[0].XDP; x != nil {
		s.Mode = x.Mode
		if x.Prog != nil {
			s.Prog = x.Prog.ID
		}
	}
	return s
}

func progID(t testing.TB, p *Program) uint32 {
	t.Helper()
	info, err := p.prog.Info()
	if err != nil {
		t.Fatalf("program info: %v", err)
	}
	id, ok := info.ID()
	if !ok {
		t.Fatal("the kernel reports no program id")
	}
	return uint32(id)
}

func mapIDs(t testing.TB, p *Program) []ebpf.MapID {
	t.Helper()
	var ids []ebpf.MapID
	for _, m := range p.maps {
		info, err := m.Info()
		if err != nil {
			t.Fatalf("map info: %v", err)
		}
		id, ok := info.ID()
		if !ok {
			t.Fatal("the kernel reports no map id")
		}
		ids = append(ids, id)
	}
	return ids
}

// attach attaches p inside namespace n.
func attach(t testing.TB, n *nstest.NS, p *Program, dev string, mode Mode) (Mode, error) {
	t.Helper()
	idx := n.Interface(t, dev).Index
	var got Mode
	err := n.Do(func() (err error) {
		got, err = p.Attach(idx, mode)
		return err
	})
	return got, err
}

// gone waits (at most testkit.Patience) until the kernel has freed the
// program and maps of the given ids: it releases maps after an RCU grace
// period, not at close.
func gone(t testing.TB, prog uint32, maps []ebpf.MapID) {
	t.Helper()
	var left []string
	if !testkit.Poll(testkit.Patience, func() bool {
		left = nil
		if p, err := ebpf.NewProgramFromID(ebpf.ProgramID(prog)); err == nil {
			p.Close()
			left = append(left, "program")
		} else if !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("program %d: %v", prog, err)
		}
		for _, id := range maps {
			if m, err := ebpf.NewMapFromID(id); err == nil {
				m.Close()
				left = append(left, "map")
			} else if !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("map %d: %v", id, err)
			}
		}
		return len(left) == 0
	}) {
		t.Fatalf("still in the kernel %v after Close: %v", testkit.Patience, left)
	}
}

// TestAttachClose: Auto picks native mode on a veth, generic mode can be
// asked for, the program shows on the interfaces, and Close leaves no
// attachment, program or map behind.
func TestAttachClose(t *testing.T) {
	nstest.RequireRoot(t)
	ns := newNetNS(t)
	nstest.VethNamed(t, ns, "veth0", ns, "veth1")
	p, err := Load(2)
	skipIfDenied(t, "BPF", err)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			p.Close()
		}
	})
	id, maps := progID(t, p), mapIDs(t, p)

	mode, err := attach(t, ns, p, "veth0", Auto)
	if err != nil || mode != Native {
		t.Fatalf("Attach(veth0, Auto) = %v, %v; want native (veth has native XDP)", mode, err)
	}
	if s := xdp(t, ns, "veth0"); s != (xdpState{Mode: 1, Prog: id}) {
		t.Errorf("veth0: %+v, want driver mode with program %d", s, id)
	}
	if _, err := attach(t, ns, p, "veth0", Generic); err == nil {
		t.Error("a second Attach to veth0 succeeded")
	}
	other := load(t, 1)
	if _, err := attach(t, ns, other, "veth0", Auto); err == nil {
		t.Error("another program attached over vipd's")
	}
	if s := xdp(t, ns, "veth0"); s != (xdpState{Mode: 1, Prog: id}) {
		t.Errorf("veth0 after another program tried: %+v, want driver mode with program %d", s, id)
	}
	mode, err = attach(t, ns, p, "veth1", Generic)
	if err != nil || mode != Generic {
		t.Fatalf("Attach(veth1, Generic) = %v, %v", mode, err)
	}
	if s := xdp(t, ns, "veth1"); s != (xdpState{Mode: 2, Prog: id}) {
		t.Errorf("veth1: %+v, want generic mode with program %d", s, id)
	}
	if _, err := attach(t, ns, p, "veth1", Mode(7)); err == nil {
		t.Error("Attach with an invalid mode succeeded")
	}

	closed = true
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, dev := range []string{"veth0", "veth1"} {
		if s := xdp(t, ns, dev); s != (xdpState{}) {
			t.Errorf("%s after Close: %+v, want no XDP program", dev, s)
		}
	}
	gone(t, id, maps)
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := p.Attach(1, Auto); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Attach after Close: %v, want net.ErrClosed", err)
	}
	if err := p.Register(0, 0); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Register after Close: %v, want net.ErrClosed", err)
	}
	if err := p.Update(nil, nil, nil); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Update after Close: %v, want net.ErrClosed", err)
	}
}

// TestAttachAutoFallsBack: on a device without native XDP (a bridge), Auto
// falls back to generic mode and Native fails.
func TestAttachAutoFallsBack(t *testing.T) {
	p := load(t, 1)
	ns := newNetNS(t)
	ns.Must(t, "ip", "link", "add", "br0", "type", "bridge")
	if _, err := attach(t, ns, p, "br0", Native); err == nil {
		t.Fatal("Attach(br0, Native) succeeded; a bridge has no native XDP")
	}
	if s := xdp(t, ns, "br0"); s != (xdpState{}) {
		t.Fatalf("br0 after a failed native attach: %+v", s)
	}
	mode, err := attach(t, ns, p, "br0", Auto)
	if err != nil || mode != Generic {
		t.Fatalf("Attach(br0, Auto) = %v, %v; want generic", mode, err)
	}
	if s := xdp(t, ns, "br0"); s != (xdpState{Mode: 2, Prog: progID(t, p)}) {
		t.Errorf("br0: %+v, want generic mode", s)
	}
}

// TestAttachBadInterface: an interface index that does not exist.
func TestAttachBadInterface(t *testing.T) {
	p := load(t, 1)
	ns := newNetNS(t)
	if err := ns.Do(func() error {
		_, err := p.Attach(1<<30, Auto)
		return err
	}); err == nil {
		t.Error("Attach to a missing interface succeeded")
	}
}

// TestRegisterBounds: queues outside the XSKMAP.
func TestRegisterBounds(t *testing.T) {
	p := load(t, 2)
	for _, q := range []int{-1, 2} {
		if err := p.Register(q, 0); err == nil {
			t.Errorf("Register(%d) on a 2-queue program succeeded", q)
		}
		if err := p.Unregister(q); err == nil {
			t.Errorf("Unregister(%d) on a 2-queue program succeeded", q)
		}
	}
	if err := p.Register(1, 0); err == nil {
		t.Error("Register of a non-AF_XDP fd succeeded")
	}
	for _, q := range []int{0, -1, maxQueues + 1} {
		if _, err := Load(q); err == nil {
			t.Errorf("Load(%d) succeeded", q)
		}
	}
}

// crashEnv names the namespace in which the child process of
// TestCrashLeavesNothing attaches the program.
const crashEnv = "VIPDXDP_CRASH_NETNS"

// TestCrashLeavesNothing: a vipd killed with SIGKILL, which runs no Close,
// leaves no XDP program on its interface. The test runs itself as a child
// that attaches and waits; the parent kills that child (and only it).
func TestCrashLeavesNothing(t *testing.T) {
	if name := os.Getenv(crashEnv); name != "" {
		crashChild(t, &nstest.NS{Name: name})
		return
	}
	nstest.RequireRoot(t)
	ns := newNetNS(t)
	nstest.VethNamed(t, ns, "veth0", ns, "veth1")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashLeavesNothing$")
	cmd.Env = append(os.Environ(), crashEnv+"="+ns.Name)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "attached ") {
				ready <- sc.Text()
				break
			}
		}
		close(ready)
		for sc.Scan() { // drain
		}
	}()
	var line string
	select {
	case line = <-ready:
	case <-time.After(60 * time.Second):
		t.Fatal("the child did not attach within 60 s")
	}
	var id uint32
	if _, err := fmt.Sscanf(line, "attached %d", &id); err != nil {
		t.Fatalf("child said %q: %v", line, err)
	}
	if s := xdp(t, ns, "veth0"); s != (xdpState{Mode: 1, Prog: id}) {
		t.Fatalf("veth0 while the child runs: %+v, want driver mode with program %d", s, id)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	var s xdpState
	if !testkit.Poll(testkit.Patience, func() bool { s = xdp(t, ns, "veth0"); return s == xdpState{} }) {
		t.Fatalf("veth0 %v after the child was killed: %+v, want no XDP program", testkit.Patience, s)
	}
}

// crashChild attaches a program in namespace ns, says so on stdout and
// waits (bounded) to be killed.
func crashChild(t *testing.T, ns *nstest.NS) {
	p, err := Load(1)
	if err != nil {
		t.Fatalf("child: Load: %v", err)
	}
	if mode, err := attach(t, ns, p, "veth0", Native); err != nil || mode != Native {
		t.Fatalf("child: Attach: %v, %v", mode, err)
	}
	fmt.Printf("attached %d\n", progID(t, p))
	time.Sleep(2 * time.Minute)
	t.Fatal("child: not killed within 2 min")
}
