package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/internal/nstest"
	"github.com/vipd/vipd/testbed"
)

func TestSmokeNAT(t *testing.T) {
	nstest.RequireRoot(t)
	bed := testbed.New(t, testbed.Options{NoDecap: true})
	v := bed.StartVIPD(bed.Config(testbed.ConfigOptions{}))
	c := bed.HTTPClient(5 * time.Second)
	ctx := context.Background()
	counts := map[string]int{}
	for i := 0; i < 30; i++ {
		body, err := testbed.Get(ctx, c, "http://198.18.0.100/")
		if err != nil {
			t.Fatalf("request %d: %v\n%s", i, err, v.Log())
		}
		counts[strings.TrimSpace(body)]++
	}
	t.Logf("per backend: %v", counts)
	if err := v.Stop(); err != nil {
		t.Fatal(err)
	}
}
