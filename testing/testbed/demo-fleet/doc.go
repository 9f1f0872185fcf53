// Command demo-fleet is `make demo-fleet`: three vipd boxes behind BIRD
// that take their VIPs, backends and seed from one fleet in a 3-member etcd
// (Debian's etcd-server, run in the router's namespace). It pushes the
// fleet's configuration, starts the boxes with no VIP in their files,
// streams 100 TCP connections through the DSR VIP, pushes a new backend,
// drains one through the fleet with -wait, then kills two of the three
// etcd members and shows that the boxes go stale while the traffic carries
// on; `vipd fleet status` at each step. It needs root, bird2 and
// etcd-server (make demo-fleet installs them), removes everything it
// created, and takes about 40 seconds.
package main
