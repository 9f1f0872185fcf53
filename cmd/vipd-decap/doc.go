// Command vipd-decap decapsulates vipd's DSR traffic on a backend whose
// kernel cannot: it receives the IPv4-in-IPv4 packets (and, with -ipv6,
// IPv6-in-IPv6) that vipd addresses to the backend, strips the outer
// header and delivers the client's packet to the backend's own stack
// through a TUN device, so that the backend's servers answer the client
// directly. The work is done by package decap.
//
// # When it is needed
//
// A DSR backend normally decapsulates with the kernel: an ipip (IPv6:
// ip6tnl) device such as `ip link add tunl0 type ipip`. Use vipd-decap
// instead where that is impossible:
//
//   - kernels built without the ipip / ip6_tunnel modules (check: `ip link
//     add t0 type ipip` answers "Unknown device type");
//   - containers that share the host's kernel but may not load modules
//     (no CAP_SYS_MODULE), when the host has not loaded them.
//
// Do not run it next to a kernel ipip device that matches the same
// traffic: the kernel would deliver every packet twice.
//
// # Running it
//
// As root, or with CAP_NET_ADMIN and CAP_NET_RAW (for example
// `setcap cap_net_admin,cap_net_raw+ep vipd-decap`, or the same
// capabilities in a systemd unit's AmbientCapabilities). It works in the
// network namespace it is started in (`ip netns exec NS vipd-decap`).
//
//	vipd-decap -allow 198.51.100.10 -check-local -fix-sysctls
//
// Flags:
//
//	-tun NAME            TUN device to create (default vipd-tun0); it
//	                     disappears when vipd-decap exits
//	-ipv6                also decapsulate IPv6 in IPv6
//	-allow P[,P...]      outer sources to accept: vipd's encapsulation
//	                     addresses or prefixes; empty accepts anyone, so
//	                     set it on every host reachable from outside
//	-check-local         drop inner packets not addressed to this host
//	-fix-sysctls         set net.ipv4.conf.all.rp_filter=0 when needed
//	                     (other interfaces keep their effective value);
//	                     restored on exit
//	-stats-interval D    log the counters every D (default 1m; 0: on exit)
//	-log-level L         debug, info, warn, error
//	-log-json            log in JSON
//	-version             print the version
//
// SIGTERM or SIGINT stops it: it logs the final counters, removes the TUN
// device, restores the sysctls it changed and exits 0. It exits 1 when it
// cannot start or a socket fails, 2 on bad usage.
//
// # The backend's setup
//
// What any DSR backend needs, with or without vipd-decap:
//
//	ip addr add VIP/32 dev lo                    # IPv6: VIP/128
//	sysctl -w net.ipv4.conf.all.arp_ignore=1     # do not answer ARP for the VIP
//	sysctl -w net.ipv4.conf.all.arp_announce=2   # nor use it as ARP source
//
// What vipd-decap needs besides (see package decap for the measurements):
// reverse-path filtering off for the TUN device, which it sets itself,
// and net.ipv4.conf.all.rp_filter=0 (the kernel applies the maximum of
// all and the interface, and even loose mode drops on the address-less
// TUN). Without -fix-sysctls it refuses to start when all is not 0 and
// prints the command to run. If a client of the VIP is the backend host
// itself, also set net.ipv4.conf.vipd-tun0.accept_local=1 after start.
//
// Receive offload: on a NIC with GRO, merged TCP segments are repaired
// (the "completed" counter); merged UDP datagrams (only for sockets that
// enable UDP_GRO, as QUIC servers do) cannot be and are dropped
// ("drop_merged_udp"); turn GRO off on that NIC if the counter moves.
package main
