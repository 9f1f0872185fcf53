// Package events is vipd's event log: an in-memory ring of what happened
// to the balancer — health transitions, drains, overrides, reloads with
// their diffs, role changes, BGP session changes, passive ejections, fleet
// revisions, and every change made through the admin socket with its
// caller — in order, each with a sequence number and a time. The admin
// API serves it (GET /v1/events?since=N), vipd events prints and follows
// it, the status page shows the last ones. The journal has the same
// events as log lines: the daemon logs each as it records it.
//
// A Log keeps the last N events; older ones fall off (a reader that
// fell behind learns how many it missed). It does no I/O.
package events
