package daemon

import (
	"slices"
	"testing"

	"github.com/vipd/vipd/config"
	"github.com/vipd/vipd/dataplane"
)

// TestSchedulerNamesAgree: the configuration's schedulers are the
// dataplane's, and they agree on which are consistent across boxes.
func TestSchedulerNamesAgree(t *testing.T) {
	if !slices.Equal(config.Schedulers, dataplane.SchedulerNames()) {
		t.Fatalf("config %v, dataplane %v", config.Schedulers, dataplane.SchedulerNames())
	}
	for _, name := range config.Schedulers {
		s, ok := dataplane.ParseScheduler(name)
		if !ok || s.Consistent() != config.ConsistentScheduler(name) {
			t.Errorf("%s: parsed %v, consistent %v vs %v", name, ok, s.Consistent(), config.ConsistentScheduler(name))
		}
	}
}
