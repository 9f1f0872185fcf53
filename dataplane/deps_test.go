package dataplane

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDoesNotLinkConfig: the data plane takes a Spec, never the
// configuration file; it and everything it imports must not reach
// package config or the TOML parser (conntrack owns its default
// timeouts, and config refers to them).
func TestDoesNotLinkConfig(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list gave %d packages: %q", len(deps), out)
	}
	for _, d := range deps {
		if d == "github.com/vipd/vipd/control/config" || strings.HasPrefix(d, "github.com/BurntSushi/toml") {
			t.Errorf("the data plane depends on %s", d)
		}
	}
}
