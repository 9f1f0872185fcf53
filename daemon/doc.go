// Package daemon wires vipd together: it opens the dataplane queues
// through a Platform, runs one worker per queue, compiles configuration,
// health and drains into snapshots (package control) and publishes them,
// serves the admin API, and reloads the configuration on request without
// disturbing the flows of VIPs and backends that stay.
//
// The Platform interface is the daemon's only access to the host: the
// Linux platform (AF_XDP or AF_PACKET, the XDP steering program, ARP and
// rtnetlink) for real use, an in-memory one for tests.
package daemon
