package daemon

import (
	"testing"
	"time"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/dataplane"
)

// TestRateSampler: rates are each counter's increase over the last
// interval divided by its length, per VIP, backend and worker; none before
// two samples; a counter going backwards reads as 0.
func TestRateSampler(t *testing.T) {
	t0 := time.Unix(1000, 0)
	counters := func(rx, tx, vipPkts, vipBytes, beFlows, noRoute uint64) []*dataplane.Counters {
		c := &dataplane.Counters{RxFrames: rx,
			VIPs:     []dataplane.FlowCounters{{}, {Packets: vipPkts, Bytes: vipBytes, OutPackets: 2 * vipPkts, OutBytes: 2 * vipBytes, NewFlows: beFlows}},
			Backends: []dataplane.FlowCounters{{}, {}, {NewFlows: beFlows}}}
		c.Verdicts[dataplane.VerdictTX] = tx
		c.Drops[dataplane.DropReasons()[0]] = noRoute
		return []*dataplane.Counters{c, {RxFrames: rx / 2}}
	}
	var s rateSampler
	s.sample(counters(100, 90, 100, 10000, 5, 1), t0)
	if r := s.vip(1); r != (api.Rates{}) {
		t.Errorf("rates after one sample: %+v", r)
	}
	s.sample(counters(300, 250, 300, 50000, 25, 5), t0.Add(2*time.Second))
	if r := s.vip(1); withoutOut(r) != (api.Rates{PacketsPerSec: 100, BytesPerSec: 20000, NewFlowsPerSec: 10}) ||
		r.OutPacketsPerSec == nil || *r.OutPacketsPerSec != 200 || r.OutBytesPerSec == nil || *r.OutBytesPerSec != 40000 {
		t.Errorf("vip rates %+v", r)
	}
	if r := s.backend(2); r.NewFlowsPerSec != 10 {
		t.Errorf("backend rates %+v", r)
	}
	if r := s.backend(99); r != (api.Rates{}) {
		t.Errorf("unknown backend: %+v", r)
	}
	ws := s.workerStates()
	if len(ws) != 2 || ws[0].RxPerSec != 100 || ws[0].TxPerSec != 80 || ws[1].RxPerSec != 50 || ws[1].Queue != 1 {
		t.Fatalf("workers %+v", ws)
	}
	if d := ws[0].DropsPerSec[dataplane.DropReasons()[0].String()]; d != 2 || len(ws[0].DropsPerSec) != 1 || ws[0].DroppedTotal != 5 {
		t.Errorf("drops %+v", ws[0])
	}
	s.sample(counters(0, 0, 0, 0, 0, 0), t0.Add(3*time.Second))
	if r := s.vip(1); withoutOut(r) != (api.Rates{}) || *r.OutPacketsPerSec != 0 {
		t.Errorf("counters reset: %+v", r)
	}
}
