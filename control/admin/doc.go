// Package admin is vipd's administration server over HTTP: the admin
// API's handlers, the Prometheus collector and the status page. The bodies
// it serves and takes are package api's (admin/api); the vipd commands
// reach it through package client (admin/client) and print its answers
// themselves (cmd/vipd):
//
//	GET  /           the status page: HTML rendered from /v1/state, reloading
//	                 itself, no script or external asset
//	GET  /metrics    Prometheus text format: packets, bytes and new flows per
//	                 VIP and backend, drops by reason, ICMP, conntrack,
//	                 per-worker batch sizes, driver counters
//	GET  /v1/state   JSON: VIPs, backends, weights, health and why, drains,
//	                 overrides, rates, active flows, workers, BGP peers
//	GET  /v1/where   ?vip=NAME&client=ADDR:PORT: the backend a new flow gets
//	GET  /v1/conns   ?vip=&client=&backend=&limit=: the pinned flows
//	GET  /healthz    200 while the daemon's workers run, once its first round
//	                 of health checks is over
//	POST /v1/drain   {"vip": NAME, "backend": "ADDR:PORT", "drain": true|false}
//	POST /v1/drain-box {"undo": false|true}: withdraw every BGP route, or
//	                 announce them again
//	POST /v1/override {"vip": NAME, "backend": "ADDR:PORT"} and one of
//	                 "weight": N, "reset_weight": true, "disabled": true|false
//	POST /v1/reload  reload the file; answers what changed or every error
//	POST /v1/role    {"role": "active"|"standby"}: the neighbor role
//
// Every endpoint answers 503 until the daemon's workers run. A handler is
// made for one kind of listener (Access): the TCP listener ([admin]
// listen, loopback by default) is ReadOnly and refuses changes, because
// every local user and every web page a browser on the box opens can reach
// it; changes are served only on the Unix socket ([admin] socket, mode
// 0600), whose file permissions are the authentication, as for
// wireguard-go's control API. Changes must also come as application/json
// (else 415), which a web page cannot make a browser send unasked. The TCP
// listener serves a request only if its Host is an IP address, localhost
// or a name in [admin] allowed_hosts (HostCheck; else 421), so that a page
// whose name is rebound to 127.0.0.1 cannot read it either.
//
// The daemon implements Provider. The handlers answer with api's types
// only; the server alone knows the data plane's: /metrics reads its
// counters (Metrics), and WireConntrack turns the connection table's
// stats into /v1/state's.
package admin
