package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipd/vipd/internal/nstest"
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
