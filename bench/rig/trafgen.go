package rig

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/vipd/vipd/internal/nstest"
)

// Traffic is what the generator sends: 60-byte frames (64 on a wire that
// carries the FCS) of UDP from 63 client addresses (198.18.2.1–63) and
// 1000 source ports (10000–10999). Both step once per frame, so the
// frames cycle through lcm(63, 1000) = 63000 distinct flows.
type Traffic struct {
	DstMAC  string
	Dst     netip.Addr
	DstPort int
}

// Flows is the number of distinct 5-tuples Traffic cycles through.
const Flows = 63 * 1000

// FrameLen is the generated frame's length without the FCS.
const FrameLen = 14 + 20 + 8 + 18

// Config is the trafgen packet configuration. trafgen recomputes the IPv4
// and UDP checksums whenever a dinc field changes.
func (tr Traffic) Config() string {
	return fmt.Sprintf("{ eth(da=%s, sa=02:00:00:00:00:01), "+
		"ipv4(sa=198.18.2.1, sa[3]=dinc(1, 63), da=%s, ttl=64), "+
		"udp(sp=dinc(10000, 10999), dp=%d), fill(0x00, 18) }\n", tr.DstMAC, tr.Dst, tr.DstPort)
}

// Generator is a running trafgen.
type Generator struct {
	cmd  *exec.Cmd
	done chan struct{}
	out  string
}

// GenOptions place the generator.
type GenOptions struct {
	// CPUs is the taskset list trafgen may run on; Procs how many
	// processes it starts (each pinned to one of its CPUs).
	CPUs  string
	Procs int
	// Bypass sends through PACKET_QDISC_BYPASS (trafgen's default): the
	// transmit queue is then the sending CPU modulo the queue count. Off
	// (-q), the kernel's transmit hash spreads flows over the queues.
	Bypass bool
}

// StartGenerator runs trafgen in the generator namespace for at most
// limit (its own packet bound and a context deadline both enforce it;
// Stop ends it sooner). It is stopped, by process group, at cleanup.
func StartGenerator(t nstest.T, r *Rig, tr Traffic, o GenOptions, limit time.Duration, dir string) *Generator {
	t.Helper()
	cfg := filepath.Join(dir, "trafgen.cfg")
	if err := os.WriteFile(cfg, []byte(tr.Config()), 0o644); err != nil {
		t.Fatalf("rig: %v", err)
	}
	if o.Procs <= 0 {
		o.Procs = 1
	}
	// The generator does at most ~1 Mpps here; 3 Mpps × limit never cuts
	// a window short, and ends a run whose Stop was missed.
	maxPkts := int64(3e6 * limit.Seconds())
	args := []string{"netns", "exec", r.Gen.Name, "taskset", "-c", o.CPUs,
		"trafgen", "-o", GenIf, "-i", cfg, "-P", strconv.Itoa(o.Procs), "-n", strconv.FormatInt(maxPkts, 10),
		// Don't tune /proc/sys/net/core (not writable in a namespace
		// anyway), and never touch IRQ affinities, which are global.
		"--no-sock-mem", "--notouch-irq", "-C"}
	if !o.Bypass {
		args = append(args, "-q")
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	cmd := exec.CommandContext(ctx, "ip", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// trafgen forks one process per CPU: signal the whole group (all of
	// it started here).
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	logf := filepath.Join(dir, "trafgen.log")
	f, err := os.Create(logf)
	if err != nil {
		cancel()
		t.Fatalf("rig: %v", err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		cancel()
		f.Close()
		t.Fatalf("rig: start trafgen: %v", err)
	}
	g := &Generator{cmd: cmd, done: make(chan struct{}), out: logf}
	go func() {
		cmd.Wait()
		f.Close()
		cancel()
		close(g.done)
	}()
	t.Cleanup(g.Stop)
	return g
}

// Running reports whether trafgen is still running.
func (g *Generator) Running() bool {
	select {
	case <-g.done:
		return false
	default:
		return true
	}
}

// Log returns what trafgen printed.
func (g *Generator) Log() string {
	b, _ := os.ReadFile(g.out)
	return string(b)
}

// Stop interrupts trafgen (SIGINT to its process group, SIGKILL after 2 s)
// and waits for it.
func (g *Generator) Stop() {
	if !g.Running() {
		return
	}
	syscall.Kill(-g.cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-g.done:
	case <-time.After(2 * time.Second):
		syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL)
		<-g.done
	}
}
