package daemon

import (
	"fmt"
	"time"

	"github.com/vipd/vipd/control"
	"github.com/vipd/vipd/control/admin/api"
)

// The event log (package events): the daemon records what happens to the
// balancer as it happens — health transitions (publishLocked), drains,
// overrides, reloads, role changes, BGP sessions, passive ejections, fleet
// revisions — and the admin socket's audit adds each change with its
// caller (RecordEvent). Each of these is also a log line (the journal).

// event records e in the event log.
func (d *Daemon) event(e api.Event) { d.events.Add(e) }

// RecordEvent implements admin.EventRecorder: the admin socket's audit of
// a change, with its caller.
func (d *Daemon) RecordEvent(e api.Event) { d.event(e) }

// Events implements admin.Provider: the events after seq, at most most.
func (d *Daemon) Events(seq uint64, most int) *api.EventsAnswer {
	evs, missed := d.events.Since(seq, most)
	if evs == nil {
		evs = []api.Event{}
	}
	return &api.EventsAnswer{Events: evs, Missed: missed, Last: d.events.Last()}
}

// healthEventLocked records backend ref's health report r against what
// was published before (prev, known before: wasKnown), when its verdict
// changed: counted per backend for /metrics, and an event with the last
// check's error.
//
// +checklocks:d.mu
func (d *Daemon) healthEventLocked(ref uint32, prev control.Status, wasKnown bool, r report, now time.Time) {
	if !r.known || wasKnown && prev.Down == r.st.Down && prev.Draining == r.st.Draining {
		return
	}
	if d.plan == nil {
		return
	}
	v, b, ok := d.plan.BackendOf(ref)
	if !ok {
		return
	}
	key := control.BackendKey(v, b)
	d.transitions[key]++
	d.lastChange[key] = now
	from := "unknown"
	if wasKnown {
		from = healthWord(prev)
	}
	what := from + " → " + healthWord(r.st)
	if r.st.Down && d.checks != nil {
		if rec, ok := d.checks.Records()[ref]; ok && rec.LastError != "" {
			what += ": " + rec.LastError
		}
	}
	d.event(api.Event{Time: now, Kind: api.EventHealth, VIP: v.Name, Backend: backendLabel(b), What: what})
}

// healthWord names a check's verdict.
func healthWord(st control.Status) string {
	switch {
	case st.Down:
		return "down"
	case st.Draining:
		return "draining"
	}
	return "up"
}

// bgpSessionEvent records a BGP session that came up or went down.
func (d *Daemon) bgpSessionEvent(peer string, up bool, reason string) {
	what := "session down"
	if up {
		what = "session established"
	}
	if reason != "" {
		what += ": " + reason
	}
	d.event(api.Event{Kind: api.EventBGP, Backend: peer, What: what})
}

// overrideWhat says what an override request asks, for its event.
func overrideWhat(req *api.OverrideRequest) string {
	switch {
	case req.Weight != nil:
		return fmt.Sprintf("weight %d", *req.Weight)
	case req.ResetWeight:
		return "weight back to the file's"
	case req.Disabled != nil && *req.Disabled:
		return "disabled"
	case req.Disabled != nil:
		return "enabled"
	}
	return "no change"
}

// refLabelLocked is backend ref's label (ADDR:PORT), or its ref number.
//
// +checklocks:d.mu
func (d *Daemon) refLabelLocked(ref uint32) string {
	_, label := d.refNamesLocked(ref)
	return label
}

// refNamesLocked is backend ref's VIP name and label ("" and its ref
// number when the plan does not have it).
//
// +checklocks:d.mu
func (d *Daemon) refNamesLocked(ref uint32) (vip, label string) {
	if d.plan != nil {
		if v, b, ok := d.plan.BackendOf(ref); ok {
			return v.Name, backendLabel(b)
		}
	}
	return "", fmt.Sprintf("ref %d", ref)
}
