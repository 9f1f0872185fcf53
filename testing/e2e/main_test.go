package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/vipd/vipd/testing/testbed"
)

// TestMain removes the binaries the test bed built once the tests are done.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := testbed.RemoveBinaries(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: removing the bed's binaries:", err)
	}
	os.Exit(code)
}
