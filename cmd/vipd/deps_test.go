package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDaemonDoesNotImportQUICGo: quic-go serves the tests and the backend
// side (testing/testbed/quicbackend) only; vipd decodes QUIC-LB with package
// quiclb, which needs the standard library alone. A daemon that linked a
// QUIC stack would carry its weight and its CVEs for nothing.
func TestDaemonDoesNotImportQUICGo(t *testing.T) {
	for _, pkg := range []string{".", "../vipd-decap"} {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", pkg).Output()
		if err != nil {
			t.Skipf("go list: %v", err)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 10 {
			t.Fatalf("go list %s gave %d packages: %q", pkg, len(deps), out)
		}
		for _, d := range deps {
			if strings.HasPrefix(d, "github.com/quic-go/") {
				t.Errorf("%s depends on %s", pkg, d)
			}
		}
	}
}
