package daemon

import (
	"os"
	"path/filepath"
)

// The configurations several tests share are files under testdata/;
// a one-off configuration that is a test's subject stays inline.
// @SOCKET@ (and health.toml's SLOW and ALLDOWN) are filled in by the
// tests.
var (
	// testConfig: a NAT VIP "web" with two backends and a DSR VIP "dsr"
	// with one, no health checks.
	testConfig = fixture("two-vips.toml")
	// healthConfig: VIP "web" with two backends checked by HTTP every
	// 20 ms.
	healthConfig = fixture("health.toml")
	// tunnelConfig: an IPIP VIP and a GUE VIP whose backends are checked
	// through their tunnels every 20 ms.
	tunnelConfig = fixture("tunnel.toml")
	// generatedHead heads the configurations built by code (churn,
	// benchmarks): no admin listener or socket.
	generatedHead = fixture("generated-head.toml")
)

// fixture returns the file testdata/name (a package-level variable's
// value, so it panics rather than fail a test).
func fixture(name string) string {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		panic(err)
	}
	return string(b)
}
