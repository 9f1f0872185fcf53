// Package daemon wires vipd together: it opens the dataplane queues
// through a Platform, runs one worker per queue, compiles configuration,
// health, drains and the operator's run-time overrides into snapshots
// (package control) and publishes them,
// serves the admin API, and reloads the configuration on request without
// disturbing the flows of VIPs and backends that stay.
//
// Publishing is incremental: a health report or a drain recompiles only
// its VIP and builds the snapshot from the last one
// (dataplane.NewSnapshotFrom); a reload or a change on the host compiles
// everything, still keeping every Maglev table whose inputs did not change.
// Health reports go through a publisher goroutine that publishes at once
// when idle, and at most once per publishGap under a burst; reloads,
// drains and host changes publish before they return.
//
// The Platform interface is the daemon's only access to the host: the
// Linux platform (AF_XDP or AF_PACKET, the XDP steering program, ARP and
// rtnetlink) for real use, an in-memory one for tests.
package daemon
