// Command demo-ha is `make demo-ha`: two vipd boxes on one segment under
// keepalived (Debian's, with the package's example keepalived.conf), no
// BGP. It streams long-lived TCP connections through a DSR and a NAT VIP,
// kills vipd on the active box with SIGKILL, and prints how keepalived
// moved the VIPs, how long it took and how many connections broke (none:
// both boxes pick the same backends, with no connection table copied),
// then the other box's whole `vipd status`, taken while it carried them.
// It needs root and keepalived, and removes everything it created.
package main
