// Command vipd-decap decapsulates vipd's DSR traffic on a backend whose
// kernel cannot: it receives the IPv4-in-IPv4 packets and the GUE
// datagrams (and, with -ipv6, IPv6-in-IPv6 and GUE over IPv6) that vipd
// addresses to the backend, strips the outer headers and delivers the
// client's packet to the backend's own stack through a TUN device, so
// that the backend's servers answer the client directly. As a backend
// agent it also puts the VIPs on lo, sets the ARP sysctls a DSR backend
// needs, serves its counters to Prometheus, and undoes its changes when
// it stops. With -chain it takes part in vipd's previous-owner
// forwarding: a packet vipd marks with the flow's previous backend, for
// a connection this host does not have, is sent on to that backend. The
// work is done by package decap.
//
// Use it where the kernel's ipip, ip6_tunnel and fou modules are missing
// (kernels built without them, containers that may not load them), and
// not next to a kernel tunnel that matches the same traffic. Setting a
// backend up, the packaged unit and the upgrade from the old, unsafe
// defaults are in docs/operations.md, "DSR backend setup"; how it works
// and what it changes on the host in docs/decap.md; the reference is
// vipd-decap(8).
//
// # Running it
//
// As root, or with CAP_NET_ADMIN and CAP_NET_RAW (for example
// `setcap cap_net_admin,cap_net_raw+ep vipd-decap`, or the same
// capabilities in a systemd unit's AmbientCapabilities; a -gue-port
// below 1024 also needs CAP_NET_BIND_SERVICE). It works in the network
// namespace it is started in (`ip netns exec NS vipd-decap`).
//
//	vipd-decap -allow 198.51.100.10 -fix-sysctls \
//	    -vip 203.0.113.80 -metrics 192.0.2.5:9717
//
// -allow is required, -check-local is on, forwarding is off on the TUN
// device, and -chain sends only to -chain-peers: a backend that routes
// (any Docker or Kubernetes node) must not relay what anyone
// encapsulates. The old behaviour, for a host that needs it back while
// it is being reconfigured, is
//
//	vipd-decap -allow any -check-local=false -tun-forwarding ...
//
// plus, with -chain, a -chain-peers that covers every backend.
//
// Flags:
//
//	-tun NAME            TUN device to create (default vipd-tun0); it
//	                     disappears when vipd-decap exits
//	-ipv6                also decapsulate IPv6: IPv6 in IPv6, and GUE
//	                     over IPv6 (default off)
//	-gue-port N          UDP port for GUE, variant 1 (IP directly in
//	                     UDP), as vipd sends for VIPs with encap = "gue"
//	                     (default 6080, vipd's default; 0: no GUE)
//	-gue-sockets N       GUE sockets per family, each read by its own
//	                     goroutine; the kernel spreads flows over them by
//	                     their ports, keeping each flow on one (default
//	                     GOMAXPROCS, the CPUs it may use; 1 to 1024)
//	-allow P[,P...]      outer sources to accept: vipd's encapsulation
//	                     addresses or prefixes. Required; "any" (alone)
//	                     accepts every source
//	-check-local         drop inner packets not addressed to this host
//	                     (default on; -check-local=false delivers any)
//	-tun-forwarding      leave IP forwarding on the TUN as the host's
//	                     default sets it (default off: forwarding=0 on
//	                     the TUN, kept so while running)
//	-chain               previous-owner forwarding: a hinted packet that
//	                     starts no connection and that no local socket
//	                     holds is sent on to the previous owner (default
//	                     off: hinted packets are delivered here)
//	-chain-peers P[,P...] the other backends' addresses or prefixes: the
//	                     only addresses -chain sends packets to, and
//	                     accepted as outer sources of chained packets
//	                     only; -chain needs it, it needs -chain
//	-chain-cache N       flows whose lookup result -chain remembers
//	                     (default 4096)
//	-chain-cache-ttl D   how long it remembers one (default 1s; a SYN
//	                     for the flow forgets it at once)
//	-fix-sysctls         set net.ipv4.conf.all.rp_filter=0 when needed
//	                     (other interfaces keep their effective value);
//	                     restored on exit (default off: refuse to start)
//	-vip A[,A...]        put each VIP on lo (/32, /128) and raise
//	                     net.ipv4.conf.all.arp_ignore to 1 and arp_announce
//	                     to 2 where lower; repeatable. On exit, remove the
//	                     VIPs it added (one already on lo stays) and
//	                     restore the sysctls it changed. An IPv6 VIP needs
//	                     -ipv6. Default: none, nothing touched
//	-metrics ADDR        serve Prometheus metrics on http://ADDR/metrics
//	                     (host:port; default empty: none); the series are
//	                     listed in vipd-decap(8), the drop reasons on
//	                     decap.Reason. Bind it to an address only the
//	                     monitoring system reaches
//	-check               validate the flags, print what would be set up,
//	                     exit 0 (valid) or 2 without touching the host
//	-stats-interval D    log the counters every D (default 1m; 0: on exit)
//	-log-level L         debug, info, warn, error (default info)
//	-log-json            log in JSON
//	-version             print the version
//
// SIGTERM or SIGINT stops it: it logs the final counters, removes the TUN
// device and the VIPs it added, restores the sysctls it changed and exits
// 0. It exits 1 when it cannot start or a socket fails, 2 on bad usage.
// It logs to stderr and stays in the foreground, which is what systemd
// wants (Type=exec, KillSignal=SIGTERM, the default). If it is killed
// with SIGKILL, the TUN device still goes (the kernel removes it with its
// file), but the VIPs and sysctls stay as set: start it again and stop it
// cleanly, or undo them by hand.
package main
