package testbed

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/vipd/vipd/testing/testkit"
)

// Binaries are the programs the bed runs, built once per process.
type Binaries struct {
	VIPD, Backend, Decap string
	// QUICBackend is testbed/quicbackend, the QUIC server that issues
	// QUIC-LB connection IDs.
	QUICBackend string
}

var (
	buildOnce sync.Once
	bins      Binaries
	binDir    string
	buildErr  error
)

// Build compiles vipd, the backend server and the decapsulator into a
// temporary directory (once per process) and returns their paths.
func Build() (Binaries, error) {
	buildOnce.Do(func() {
		root, err := testkit.ModuleRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", dirPrefix("vipd-bed-bin"))
		if err != nil {
			buildErr = err
			return
		}
		binDir = dir
		bins = Binaries{
			VIPD:    filepath.Join(dir, "vipd"),
			Backend: filepath.Join(dir, "vipd-backend"),
			Decap:   filepath.Join(dir, "vipd-decap"),

			QUICBackend: filepath.Join(dir, "vipd-quicbackend"),
		}
		for pkg, out := range map[string]string{"./cmd/vipd": bins.VIPD, "./testing/testbed/backend": bins.Backend, "./cmd/vipd-decap": bins.Decap, "./testing/testbed/quicbackend": bins.QUICBackend} {
			if _, err := os.Stat(filepath.Join(root, pkg)); err != nil {
				continue // not in this tree (yet)
			}
			cmd := exec.Command("go", "build", "-o", out, pkg)
			cmd.Dir = root
			if b, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
				return
			}
		}
	})
	return bins, buildErr
}

// RemoveBinaries deletes what Build compiled. A test binary calls it from
// TestMain once its tests are done, a program before it exits; Build must
// not be called afterwards.
func RemoveBinaries() error {
	if binDir == "" {
		return nil
	}
	return os.RemoveAll(binDir)
}

// dirPrefix names a temporary directory of this process: kind, the pid,
// then MkdirTemp's random part, so that SweepStaleDirs can tell whose it is.
func dirPrefix(kind string) string { return fmt.Sprintf("%s-%d-", kind, os.Getpid()) }

// SweepStaleDirs removes the bed's temporary directories (binaries, logs,
// configurations) left by processes that no longer run: a test process
// killed outright runs no cleanup. New calls it, as it sweeps namespaces.
func SweepStaleDirs() {
	for _, kind := range []string{"vipd-bed-bin", "vipd-bed"} {
		dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), kind+"-*"))
		for _, d := range dirs {
			rest := strings.TrimPrefix(filepath.Base(d), kind+"-")
			pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
			if err != nil || pid == os.Getpid() {
				continue // not one of ours, or this process's own
			}
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); os.IsNotExist(err) {
				os.RemoveAll(d)
			}
		}
	}
}
