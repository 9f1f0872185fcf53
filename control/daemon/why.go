package daemon

import (
	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/health"
)

// addRecord puts the health checks' record of ref (why the last check
// failed, since when the verdict holds, the check's latency) into bs.
func addRecord(bs *api.BackendState, records map[uint32]health.Record, ref uint32) {
	r, ok := records[ref]
	if !ok {
		return
	}
	bs.LastError, bs.StateSince, bs.LastCheckSeconds = r.LastError, r.Since, r.LastCheck.Seconds()
}
