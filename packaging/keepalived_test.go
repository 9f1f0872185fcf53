package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/internal/sdunit"
	"github.com/vipd/vipd/testing/nstest"
)

// TestKeepalivedExample: the shipped keepalived.conf is one keepalived
// (Debian's) accepts as it stands, with script security on, on a box whose
// interfaces are eth0 and eth1, once /usr/sbin/vipd is there (here the
// vipd just built, in its place in the file).
func TestKeepalivedExample(t *testing.T) {
	nstest.RequireRoot(t)
	ka, err := exec.LookPath("keepalived")
	if err != nil {
		t.Skip("keepalived is missing: make test-deps installs Debian's keepalived")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "vipd")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/vipd").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	src, err := os.ReadFile("keepalived/keepalived.conf")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(src), "/usr/sbin/vipd "); n != 2 {
		t.Fatalf("the example names /usr/sbin/vipd %d times, want 2 (track and notify)", n)
	}
	conf := filepath.Join(dir, "keepalived.conf")
	fixed := strings.ReplaceAll(string(src), "/usr/sbin/vipd ", bin+" ")
	if err := os.WriteFile(conf, []byte(fixed), 0o644); err != nil {
		t.Fatal(err)
	}
	ns := nstest.New(t, "ka")
	ns.Must(t, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth1")
	out, err := ns.Cmd(ka, "-t", "-l", "-D", "-f", conf).CombinedOutput()
	if err != nil {
		t.Errorf("keepalived -t refuses the example: %v\n%s", err, out)
	}
	// And it is keepalived that checks: a broken copy is refused.
	if err := os.WriteFile(conf, []byte(strings.Replace(fixed, "virtual_router_id 51", "virtual_router_id 256", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := ns.Cmd(ka, "-t", "-f", conf).CombinedOutput(); err == nil {
		t.Errorf("keepalived -t took a broken example:\n%s", out)
	}
}

// TestKeepalivedStateSurvivesStop: the VRRP state keepalived-notify
// records (by default, and wherever the example keepalived.conf's
// commands say) lies outside every directory systemd removes when
// vipd.service stops, so that keepalived-check finds it after a restart
// of vipd and makes a restarted vipd on the MASTER active again; and on
// /run, a tmpfs, so that no MASTER recorded before a reboot survives it.
func TestKeepalivedStateSurvivesStop(t *testing.T) {
	f, err := os.Open("deb/vipd.service")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	unit, err := sdunit.Parse(f)
	if err != nil {
		t.Fatalf("deb/vipd.service: %v", err)
	}
	removed, err := unit.RemovedOnStop()
	if err != nil {
		t.Fatalf("deb/vipd.service: %v", err)
	}
	t.Logf("systemd removes on a stop of vipd.service: %q", removed)
	paths := map[string]string{config.DefaultKeepalivedState: "the default -state-file"}
	conf, err := os.ReadFile("keepalived/keepalived.conf")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(conf), "\n") {
		words := strings.Fields(strings.NewReplacer(`"`, " ", "=", " ").Replace(line))
		for i, w := range words {
			if (w == "-state-file" || w == "--state-file") && i+1 < len(words) {
				paths[words[i+1]] = "keepalived.conf: " + strings.TrimSpace(line)
			}
		}
	}
	for p, where := range paths {
		for _, dir := range removed {
			if sdunit.Within(p, dir) {
				t.Errorf("%s: %s lies in %s, which systemd removes whenever vipd.service stops", where, p, dir)
			}
		}
		if !sdunit.Within(p, "/run") || !filepath.IsAbs(p) {
			t.Errorf("%s: %s is not on /run, so a MASTER recorded before a reboot would outlive it", where, p)
		}
	}
}
