package testkit

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A command's test (a demo's, say) can run the command itself, as a child
// process, and read what it prints: the test binary runs the command's
// main instead of the tests when the environment variable the test names
// is "1". TestMain calls ChildMain; the test calls RunChild.

// ChildMain runs main and exits when the environment variable env is
// "1", else the tests: a TestMain for a package main whose tests run it
// with RunChild.
func ChildMain(m *testing.M, env string, main func()) {
	if os.Getenv(env) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// RunChild runs the test binary as the command (env=1, see ChildMain) in
// directory dir and returns what it printed on its standard output; the
// test fails, with both outputs, if it does not exit 0. A minute before
// the test's deadline the child gets SIGTERM (on which a demo removes
// what it created) and 45 s more to exit.
func RunChild(t *testing.T, env, dir string) string {
	t.Helper()
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-time.Minute))
		defer cancel()
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, self, "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"=1")
	cmd.Dir = dir
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 45 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", env, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// ModuleRoot is the directory of the go.mod of the module the process
// runs in (go env GOMOD): where tests and rigs build the module's
// commands and find its files.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the vipd module")
	}
	return filepath.Dir(mod), nil
}
