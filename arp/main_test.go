package arp

import (
	"testing"

	"github.com/vipd/vipd/testing/fdleak"
)

// TestMain fails the run when the tests leave file descriptors open: every
// socket the package opens (AF_PACKET, rtnetlink) must be closed by the Run
// or call that opened it, fakes or not.
func TestMain(m *testing.M) { fdleak.Main(m) }
