package testbed

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/testing/testkit"
)

// GatewayVRRP is the NAT backends' default gateway on the keepalived bed:
// a VRRP address that keepalived puts on the MASTER's egress (eth1).
var GatewayVRRP = "198.18.1.100"

// RequireKeepalived skips a test when Debian's keepalived is missing.
func RequireKeepalived(t testing.TB) {
	if _, err := exec.LookPath("keepalived"); err != nil {
		t.Skip("keepalived is missing: make test-deps installs Debian's keepalived")
	}
}

// Keepalived is keepalived running in one box of an ECMPBed.
type Keepalived struct {
	cmd  *exec.Cmd
	name string
	bed  *ECMPBed
}

// StartKeepalived runs keepalived in box i with the package's example
// configuration (packaging/keepalived/keepalived.conf) as an operator
// would adapt it: the given priority, preemption on or off, and the bed's
// vipd binary, admin socket and state file in place of the installed ones.
func (e *ECMPBed) StartKeepalived(i, priority int, preempt bool) *Keepalived {
	e.t.Helper()
	root, err := testkit.ModuleRoot()
	if err != nil {
		e.t.Fatalf("testbed: %v", err)
	}
	src, err := os.ReadFile(filepath.Join(root, "packaging/keepalived/keepalived.conf"))
	if err != nil {
		e.t.Fatalf("testbed: %v", err)
	}
	flags := fmt.Sprintf(" -socket %s -state-file %s", e.BoxSocket(i), e.KeepalivedState(i))
	r := []string{
		"priority 150 ", fmt.Sprintf("priority %d ", priority),
		"/usr/sbin/vipd keepalived-check", e.Bin.VIPD + " keepalived-check" + flags,
		"/usr/sbin/vipd keepalived-notify", e.Bin.VIPD + " keepalived-notify" + flags,
	}
	if !preempt {
		r = append(r, "# nopreempt ", "nopreempt   ")
	}
	conf := strings.NewReplacer(r...).Replace(string(src))
	for _, want := range []string{fmt.Sprintf("priority %d ", priority), flags} {
		if !strings.Contains(conf, want) {
			e.t.Fatalf("testbed: the example keepalived.conf changed: no %q after the substitutions", want)
		}
	}
	if !preempt && !strings.Contains(conf, "\n    nopreempt") {
		e.t.Fatalf("testbed: the example keepalived.conf has no nopreempt line to uncomment")
	}
	name := fmt.Sprintf("keepalived%d", i)
	file := filepath.Join(e.dir, name+".conf")
	if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
		e.t.Fatalf("testbed: %v", err)
	}
	pid := func(what string) string { return filepath.Join(e.dir, fmt.Sprintf("%s-%s.pid", name, what)) }
	// In the foreground, VRRP only, logging to its log file; pid files of
	// its own, so that the boxes' keepalived do not collide.
	cmd := e.Spawn(e.Boxes[i], name, "keepalived", "--dont-fork", "--log-console", "--log-detail", "--vrrp",
		"-f", file, "-p", pid("main"), "-r", pid("vrrp"), "-c", pid("checkers"))
	return &Keepalived{cmd: cmd, name: name, bed: e}
}

// KeepalivedState is box i's keepalived state file (keepalived-notify):
// its stand-in for the installed default, so that a stop of vipd as
// systemd does it (StopUnit) removes it exactly when systemd would
// remove the real one.
func (e *ECMPBed) KeepalivedState(i int) string {
	return e.BoxPath(i, config.DefaultKeepalivedState)
}

// Kill kills keepalived (SIGKILL), as a crash or a box lost would.
func (k *Keepalived) Kill() {
	if k.cmd.ProcessState == nil {
		k.cmd.Process.Kill()
		k.cmd.Wait()
	}
}

// Stop stops keepalived as its unit would (SIGTERM: it gives its
// addresses up with a priority-0 advertisement, which the other box takes
// at once) and waits until it has exited, for at most 10 s (then kills
// it): a keepalived started again before that finds the old one's pid
// file and refuses to run.
func (k *Keepalived) Stop() error {
	if k.cmd.ProcessState != nil {
		return nil
	}
	if err := k.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { k.cmd.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
		k.cmd.Process.Kill()
		<-done
		return fmt.Errorf("keepalived did not stop within 10 s of SIGTERM")
	}
}

// Log returns what keepalived logged so far.
func (k *Keepalived) Log() string { return k.bed.Log(k.name) }
