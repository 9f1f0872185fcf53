//go:build linux

package decap

import (
	"testing"

	"github.com/vipd/vipd/testing/fdleak"
)

// TestMain fails the run when a test leaks a file descriptor: a leaked
// TUN file keeps its device alive, a leaked raw socket keeps receiving.
func TestMain(m *testing.M) { fdleak.Main(m) }
