package e2e

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/vipd/vipd/testing/testbed"
)

// TestOverrides: vipd disable, as an operator runs it on the box, by
// forgiving names: a disabled backend gets no new connection, vipd status
// marks it, the override outlives a restart of vipd (the state file), and
// vipd enable puts the backend back to work.
func TestOverrides(t *testing.T) {
	// Echo: echo-nat shares web-nat's address.
	e := setup(t, testbed.Options{}, testbed.ConfigOptions{Echo: true})
	e.waitBackends("web-nat", "none")
	target := e.bed.Backends[0]
	sock := e.bed.AdminSocket()
	vipd := func(args ...string) string {
		return e.bed.Box.Must(t, append([]string{e.bed.Bin.VIPD}, args...)...)
	}
	// The VIP's address alone names two VIPs here (web-nat and echo-nat):
	// refused with both named.
	out, err := e.bed.Box.Cmd(e.bed.Bin.VIPD, "disable", "-socket", sock, testbed.VIPNAT.String(), target.Addr.String()).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(string(out), "names several VIPs; did you mean") ||
		!strings.Contains(string(out), "web-nat (") || !strings.Contains(string(out), "echo-nat (") {
		t.Errorf("an ambiguous VIP: %v\n%s", err, out)
	}
	// With its port, and the backend by its address alone.
	vip := testbed.VIPNAT.String() + ":80"
	if out := vipd("disable", "-socket", sock, vip, target.Addr.String()); !strings.Contains(out, "web-nat "+target.Addr.String()+":8080: disabled") {
		t.Errorf("vipd disable: %s", out)
	}
	if counts := e.names(natURL, 40); counts[target.Name] != 0 {
		t.Errorf("the disabled backend got %d of 40 new connections: %v", counts[target.Name], counts)
	}
	if out := vipd("status", "-admin", testbed.AdminAddr); !strings.Contains(out, "down(disabled*)") || !strings.Contains(out, "run-time override in force") {
		t.Errorf("vipd status does not show the override:\n%s", out)
	}

	cfg, err := os.ReadFile(e.v.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.v.Stop(); err != nil {
		t.Fatal(err)
	}
	e.v = e.bed.StartVIPD(string(cfg))
	st := e.waitBackends("web-nat", "none")
	if b := backendByName(st, "web-nat", target); b.Override == nil || !b.Override.Disabled || b.Forwarding != "down" {
		t.Fatalf("after a restart: %+v", b)
	}
	if counts := e.names(natURL, 40); counts[target.Name] != 0 {
		t.Errorf("after a restart the disabled backend got %d of 40 new connections: %v", counts[target.Name], counts)
	}

	vipd("enable", "-socket", sock, "web-nat", target.Addr.String())
	waitFor(t, patience, "the backend taking new connections again", func() bool {
		return e.names(natURL, 20)[target.Name] > 0
	})
}
