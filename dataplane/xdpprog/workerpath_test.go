package xdpprog

import (
	"testing"
	"time"

	"github.com/vipd/vipd/conntrack"
	"github.com/vipd/vipd/dataplane"
)

// TestFlowWriterLifetimes: an entry serves fast_path_refresh (less the
// program's clock slack); a Brief one, for a flow not proven yet, a
// conntrack tick at most; a Retire one not at all (Expires in the past).
func TestFlowWriterLifetimes(t *testing.T) {
	const slack = 20 * time.Millisecond
	for _, tc := range []struct {
		name    string
		refresh time.Duration
		flow    dataplane.FastFlow
		want    time.Duration // -1: already expired
	}{
		{"proven", 5 * time.Second, dataplane.FastFlow{}, 5*time.Second - slack},
		{"brief", 5 * time.Second, dataplane.FastFlow{Brief: true}, time.Second - slack},
		{"brief, refresh shorter than a tick", 300 * time.Millisecond, dataplane.FastFlow{Brief: true}, 300*time.Millisecond - slack},
		{"retired", 5 * time.Second, dataplane.FastFlow{Retire: true, Brief: true}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &FlowWriter{refresh: int64(tc.refresh - slack), brief: int64(conntrack.TickDuration - slack)}
			before := dataplane.Nanotime()
			got := int64(f.expires(&tc.flow))
			after := dataplane.Nanotime()
			switch {
			case tc.want < 0 && got != 0:
				t.Errorf("expires %d, want 0", got)
			case tc.want >= 0 && (got < before+int64(tc.want) || got > after+int64(tc.want)):
				t.Errorf("expires %v after now, want %v", time.Duration(got-before), tc.want)
			}
		})
	}
}
