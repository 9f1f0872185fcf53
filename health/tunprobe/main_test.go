//go:build linux

package tunprobe

import (
	"testing"

	"github.com/vipd/vipd/testing/fdleak"
)

// TestMain fails the run when a test leaks a file descriptor: a leaked
// TUN file keeps its device (and its routes) alive.
func TestMain(m *testing.M) { fdleak.Main(m) }
