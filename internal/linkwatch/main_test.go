package linkwatch

import (
	"testing"

	"github.com/vipd/vipd/testing/fdleak"
)

// TestMain fails the run when the tests leave file descriptors open: every
// rtnetlink socket the package opens must be closed by the call that opened
// it.
func TestMain(m *testing.M) { fdleak.Main(m) }
