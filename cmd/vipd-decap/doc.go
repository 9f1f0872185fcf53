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
// # When it is needed
//
// A DSR backend normally decapsulates with the kernel: an ipip (IPv6:
// ip6tnl) device such as `ip link add tunl0 type ipip`, and for GUE a fou
// port (`ip fou add port 6080 gue`) in front of it. Use vipd-decap
// instead where that is impossible:
//
//   - kernels built without the ipip / ip6_tunnel / fou modules (check:
//     `ip link add t0 type ipip` answers "Unknown device type");
//   - containers that share the host's kernel but may not load modules
//     (no CAP_SYS_MODULE), when the host has not loaded them.
//
// Do not run it next to a kernel ipip device that matches the same
// traffic: the kernel would deliver every packet twice. A kernel fou port
// on the GUE port makes vipd-decap fail to start (the port is in use);
// run it with -gue-port 0 there, or remove the fou port.
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
// # Safe by default (a change)
//
// vipd-decap used to accept IPIP and GUE from any outer source and hand
// the inner packet to the stack whatever its destination, with the TUN
// device forwarding as the host does: on a backend that routes (every
// Docker or Kubernetes node) an encapsulated packet from anywhere,
// carrying a packet for another host, was routed out of the backend with
// any source address. Now:
//
//   - -allow is required. It names vipd's encapsulation addresses;
//     -allow any accepts every source, and must be said.
//   - -check-local is on: inner packets whose destination is not an
//     address of this host are dropped (not_local). -check-local=false
//     turns it off, for hosts that take whole prefixes with local routes
//     (ip route add local PREFIX dev lo), whose addresses it cannot see.
//   - Forwarding is off on the TUN device (net.ipv4.conf.TUN.forwarding=0
//     and, with -ipv6, net.ipv6.conf.TUN.forwarding=0), and set back to 0
//     when a host-wide write (net.ipv4.ip_forward from 0 to 1, as
//     Docker's start does) turns it on. The kernel then refuses to route
//     an IPv4 packet that -check-local=false let through. It does not
//     stop IPv6: Linux forwards IPv6 by net.ipv6.conf.all.forwarding
//     alone, so there only -check-local does. -tun-forwarding leaves the
//     TUN's forwarding as the host's default sets it.
//   - -chain needs -chain-peers, and sends a packet on only to an
//     address in it: the previous owner comes from the packet's hint,
//     and any other is dropped (chain_target).
//
// The old behaviour, for a host that needs it back while it is being
// reconfigured, is
//
//	vipd-decap -allow any -check-local=false -tun-forwarding ...
//
// plus, with -chain, a -chain-peers that covers every backend (for
// example the backends' subnet).
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
//	-chain               previous-owner forwarding (see below; default
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
//	                     (host:port; default empty: none)
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
// wants (Type=exec, KillSignal=SIGTERM, the default); the Debian package
// ships vipd-decap.service, which reads the flags from VIPD_DECAP_ARGS in
// /etc/default/vipd-decap (docs/operations.md, "DSR backend setup"). If
// it is killed with SIGKILL, the TUN
// device still goes (the kernel removes it with its file), but the VIPs
// and sysctls stay as set: start it again and stop it cleanly, or undo
// them by hand.
//
// # Metrics
//
// With -metrics, GET /metrics answers in the Prometheus text format:
//
//	vipd_decap_received_total                packets read (IPIP, IPv6 in IPv6, GUE)
//	vipd_decap_gue_received_total            of those, GUE datagrams
//	vipd_decap_decapsulated_total            inner packets delivered to the TUN
//	vipd_decap_decapsulated_bytes_total      their bytes
//	vipd_decap_checksums_completed_total     GRO-merged TCP segments repaired
//	vipd_decap_dropped_total{reason=...}     drops, one series per reason, zeros
//	                                         included: malformed, protocol, source,
//	                                         inner_version, inner_length,
//	                                         inner_checksum, not_local, merged_udp,
//	                                         gue_variant, write, gue_header, hint,
//	                                         chain_send, chain_target
//	vipd_decap_hinted_total                  GUE datagrams with a previous-owner hint
//	vipd_decap_hint_outcomes_total{outcome=...}
//	                                         what became of them: delivered here
//	                                         (match, syn, chained_in, lookup_error,
//	                                         chaining_off, no_ports) or chained_out
//	vipd_decap_hint_lookups_total            kernel socket lookups (sock_diag)
//	vipd_decap_hint_cache_hits_total         decisions taken from the cache
//	vipd_decap_build_info{version,goversion} 1
//
// plus the Go runtime's (go_*) and the process's (process_*) metrics. The
// endpoint only reads counters; still, bind it to an address only the
// monitoring system reaches, not 0.0.0.0 on a public interface.
//
// # Previous-owner forwarding
//
// When the backend set of a VIP changes, vipd keeps the previous Maglev
// table; a packet that misses vipd's connection table mid-connection
// goes to the current owner with the previous owner named in its GUE
// header (variant 0; see package decap for the wire format). With
// -chain, vipd-decap delivers such a packet here when it starts a
// connection (SYN), was chained here by another backend, or belongs to a
// connection this host has (one NETLINK_SOCK_DIAG query, remembered for
// -chain-cache-ttl); otherwise it sends it on, marked as chained, to the
// previous owner's GUE port (the same -gue-port on every backend), from
// this host's GUE port, if -chain-peers has that owner; a packet whose
// hint names anyone else is dropped (counted as chain_target: also the
// sign of a -chain-peers that lacks a backend). A chained packet is
// never chained again. Run every backend of such VIPs with -chain and
// with -chain-peers listing the other backends, so that each sends to
// and accepts from the others; -allow stays vipd's addresses. Only
// connected UDP sockets keep a UDP flow here. Without -chain, hinted
// packets are delivered here (counted as chaining_off): a backend
// without it loses what vipd meant to save, nothing more.
//
// # The backend's setup
//
// What any DSR backend needs, with or without vipd-decap, and what -vip
// does:
//
//	ip addr add VIP/32 dev lo                    # IPv6: VIP/128
//	sysctl -w net.ipv4.conf.all.arp_ignore=1     # do not answer ARP for the VIP
//	sysctl -w net.ipv4.conf.all.arp_announce=2   # nor use it as ARP source
//
// (The kernel applies the maximum of all and each interface's value, so
// setting all covers lo and every other interface.)
//
// What vipd-decap needs besides (see package decap for the measurements):
// reverse-path filtering off for the TUN device, which it sets itself,
// and net.ipv4.conf.all.rp_filter=0 (the kernel applies the maximum of
// all and the interface, and even loose mode drops on the address-less
// TUN). Without -fix-sysctls it refuses to start when all is not 0 and
// prints the command to run. If a client of the VIP is the backend host
// itself, also set net.ipv4.conf.vipd-tun0.accept_local=1 after start.
//
// Receive offload: on a NIC with GRO, merged IPIP TCP segments are
// repaired (the "completed" counter); merged UDP datagrams inside IPIP
// (only for sockets that enable UDP_GRO, as QUIC servers do) cannot be
// and are dropped ("drop_merged_udp"); turn GRO off on that NIC if the
// counter moves. GUE datagrams are not merged by GRO for vipd-decap's
// socket, so over GUE neither happens.
package main
