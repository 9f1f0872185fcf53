package testbed

import (
	"fmt"
	"time"

	"github.com/vipd/vipd/internal/testkit"
)

// FlowProgress is one streaming flow's progress, as SettleFlows reads it:
// who it is (its client address, its backend), the rounds it completed,
// and whether it died (then it is among the broken already).
type FlowProgress struct {
	Local, Backend string
	Rounds         int
	Dead           bool
}

// SettleFlows waits until every flow still alive has completed a round
// after now, for at most d, and returns the flows broken so far, counting
// the ones that made no progress as broken (stalled). read returns every
// flow's progress, in a fixed order, and the broken ones' reasons; it is
// called under whatever lock the caller's flows need. EchoFlows and
// package quicflow's flows settle through it.
func SettleFlows(d time.Duration, read func() ([]FlowProgress, []string)) (broken []string) {
	start, _ := read()
	testkit.Poll(d, func() bool {
		now, dead := read()
		var stalled []string
		for i, f := range now {
			if !f.Dead && i < len(start) && f.Rounds <= start[i].Rounds {
				stalled = append(stalled, fmt.Sprintf("%s (backend %s) stalled after %d rounds", f.Local, f.Backend, f.Rounds))
			}
		}
		broken = append(append([]string(nil), dead...), stalled...)
		return len(stalled) == 0
	})
	return broken
}
