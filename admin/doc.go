// Package admin is vipd's HTTP administration interface, served on
// [admin] listen (loopback by default):
//
//	GET  /metrics    Prometheus text format: packets, bytes and new flows per
//	                 VIP and backend, drops by reason, ICMP, conntrack,
//	                 per-worker batch sizes, driver counters
//	GET  /v1/state   JSON: VIPs, backends, weights, health, drains, active flows
//	POST /v1/drain   {"vip": NAME, "backend": "ADDR:PORT", "drain": true|false}
//	GET  /v1/where   ?vip=NAME&client=ADDR:PORT: the backend a new flow gets
//	GET  /healthz    200 while the daemon runs
//
// and the client side of `vipd status`, which prints /v1/state the way
// `ipvsadm -Ln` prints IPVS. The daemon implements Provider; this package
// knows nothing of packets.
package admin
