package testbed

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/vipd/vipd/testing/nstest"
	"github.com/vipd/vipd/testing/testkit"
)

// RunDemo runs a demo's program as its test does: the test binary,
// started again with the environment variable env set to 1, runs the
// demo instead of the tests (testkit.ChildMain and RunChild), in the
// module root, as root; RunDemo returns what it printed. It skips in
// -short mode (the demos run in the full suite) and when not root. When
// the test's deadline comes first, the demo gets SIGTERM, on which it
// removes what it created.
func RunDemo(t *testing.T, env string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("the demo runs in the full suite, not in -short mode")
	}
	nstest.RequireRoot(t)
	root, err := testkit.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return testkit.RunChild(t, env, root)
}

// MustHave ends a demo's process, saying what to run, unless every one of
// cmds is on PATH: target is the make target, what what they are ("BIRD
// 2 as the router"), install the package that make target installs.
func MustHave(target, what, install string, cmds ...string) {
	for _, c := range cmds {
		if _, err := exec.LookPath(c); err != nil {
			fmt.Fprintf(os.Stderr, "%s needs %s (%s not found): sudo %s installs %s\n", target, what, c, target, install)
			os.Exit(1)
		}
	}
}

// MustBeRoot ends a demo's process, saying why, unless it runs as root:
// target is the make target (make demo), why what it does that needs
// root.
func MustBeRoot(target, why string) {
	if os.Geteuid() != 0 {
		fmt.Fprintf(os.Stderr, "%s needs root: %s\n", target, why)
		os.Exit(1)
	}
}
