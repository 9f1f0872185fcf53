// Command backend is the server the test bed and `make demo` run in each
// backend namespace. It answers:
//
//	GET  /           its name (which backend took the connection)
//	GET  /bytes?n=N  N bytes of a deterministic stream (testbed.Stream)
//	POST /upload     the body's length and sha256
//	GET  /healthz    200 "ok", or 503 with "X-Drain: 1" while draining
//
// on every -http address, and echoes UDP datagrams on -udp prefixed with its
// name. It drains (lame duck) while the -drain-file exists or after
// SIGUSR1 (SIGUSR2 undrains). It is a test helper, not part of vipd.
package main
