package rig

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vipd/vipd/testing/nstest"
)

// Traffic is what the generator sends: 60-byte frames (64 on a wire that
// carries the FCS) of UDP from 63 client addresses (198.18.2.1–63) and
// 1024 source ports (10000–11023). Both step once per frame, so the
// frames cycle through lcm(63, 1024) = 64,512 distinct flows. OneFlow
// sends a single flow (198.18.2.1:10000) instead.
type Traffic struct {
	DstMAC  string
	Dst     netip.Addr
	DstPort int
	OneFlow bool
}

// Client addresses and source ports of the many-flow traffic.
const (
	Clients     = 63
	SourcePorts = 1024
	FirstPort   = 10000
)

// Flows is the number of distinct 5-tuples Traffic cycles through.
const Flows = Clients * SourcePorts // gcd(63, 1024) = 1

// FrameLen is the generated frame's length without the FCS.
const FrameLen = 14 + 20 + 8 + 18

// FlowCount is the number of distinct flows tr sends.
func (tr Traffic) FlowCount() int {
	if tr.OneFlow {
		return 1
	}
	return Flows
}

// Config is the trafgen packet configuration. trafgen recomputes the IPv4
// and UDP checksums whenever a dinc field changes.
func (tr Traffic) Config() string {
	if tr.OneFlow {
		return fmt.Sprintf("{ eth(da=%s, sa=02:00:00:00:00:01), "+
			"ipv4(sa=198.18.2.1, da=%s, ttl=64), "+
			"udp(sp=%d, dp=%d), fill(0x00, 18) }\n", tr.DstMAC, tr.Dst, FirstPort, tr.DstPort)
	}
	return fmt.Sprintf("{ eth(da=%s, sa=02:00:00:00:00:01), "+
		"ipv4(sa=198.18.2.1, sa[3]=dinc(1, %d), da=%s, ttl=64), "+
		"udp(sp=dinc(%d, %d), dp=%d), fill(0x00, 18) }\n", tr.DstMAC, Clients, tr.Dst, FirstPort, FirstPort+SourcePorts-1, tr.DstPort)
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
	// SendBuffer, when set, is the send buffer of trafgen's socket: the
	// root namespace's net.core.wmem_default is raised to it only while
	// trafgen creates its socket, and restored at once (see
	// GenSendBuffer and WmemDefault).
	SendBuffer int
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
	var wmem *WmemDefault
	if o.SendBuffer > 0 {
		// Registered before the raise: a signal's scope close restores it
		// while this function runs; the defer covers panics and Fatalf.
		wmem = NewWmemDefault()
		t.Cleanup(func() { wmem.Restore() })
		defer wmem.Restore()
		if err := wmem.Raise(o.SendBuffer); err != nil {
			cancel()
			f.Close()
			t.Fatalf("rig: raise net.core.wmem_default: %v", err)
		}
	}
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
	if wmem != nil {
		// Restore as soon as trafgen's packet socket exists (its size
		// is fixed then), or trafgen is gone, or after 5 s.
		deadline := time.Now().Add(5 * time.Second)
		for g.Running() && !packetSocketOpen(cmd.Process.Pid) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if err := wmem.Restore(); err != nil {
			t.Fatalf("rig: restore net.core.wmem_default: %v", err)
		}
		if wmem.Repaired != "" {
			fmt.Fprintf(os.Stderr, "rig: %s\n", wmem.Repaired)
		}
	}
	return g
}

// packetSocketOpen reports whether a process of process group pgid holds
// an AF_PACKET socket: an fd "socket:[INODE]" whose inode is listed in
// the process's /proc/PID/net/packet (its network namespace's).
func packetSocketOpen(pgid int) bool {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue
		}
		st, err := ParseTaskStat(string(b))
		if err != nil || st.PGrp != pgid {
			continue
		}
		pk, err := os.ReadFile(d + "/net/packet")
		if err != nil {
			continue
		}
		inodes := PacketInodes(string(pk))
		fds, _ := os.ReadDir(d + "/fd")
		for _, fd := range fds {
			l, err := os.Readlink(d + "/fd/" + fd.Name())
			if err != nil {
				continue
			}
			if ino, ok := strings.CutPrefix(l, "socket:["); ok && inodes[strings.TrimSuffix(ino, "]")] {
				return true
			}
		}
	}
	return false
}

// PacketInodes returns the socket inodes listed in /proc/net/packet (the
// last column; the first line is a header).
func PacketInodes(text string) map[string]bool {
	m := map[string]bool{}
	lines := strings.Split(text, "\n")
	for _, l := range lines[min(1, len(lines)):] {
		if f := strings.Fields(l); len(f) >= 9 {
			m[f[len(f)-1]] = true
		}
	}
	return m
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
