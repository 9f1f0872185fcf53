package api

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestNoDataPlane: the wire types and the client are what a program that
// talks to vipd links (the vipd commands, the test bed, a monitoring
// script), and they must not drag the engine in. Outside the standard
// library, admin/api depends on nothing and admin/client on admin/api
// alone: no data-plane package (dataplane, conntrack, health, packet,
// ...), no config, daemon, nor the admin server.
func TestNoDataPlane(t *testing.T) {
	const mod = "github.com/vipd/vipd/"
	allowed := map[string][]string{
		mod + "admin/api":    {mod + "admin/api"},
		mod + "admin/client": {mod + "admin/api", mod + "admin/client"},
	}
	for pkg, ok := range allowed {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}", pkg).Output()
		if err != nil {
			t.Skipf("go list: %v", err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) < 10 {
			t.Fatalf("go list %s gave %d packages: %q", pkg, len(lines), out)
		}
		for _, l := range lines {
			dep, std, _ := strings.Cut(l, " ")
			if std != "true" && !slices.Contains(ok, dep) {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}
