// Package tunprobe dials health-check connections to a DSR VIP through the
// tunnel of one backend: the probe's packets reach the backend wrapped
// exactly as the data plane wraps clients' (IP in IP or GUE, from the
// VIP's encapsulation source), so a probe succeeds only if the backend
// decapsulates them and holds the VIP — the two things a DSR backend
// needs and a check of its own address cannot see.
//
// # How
//
// The kernel's TCP stack makes the connection, so TCP and HTTP checks are
// ordinary sockets (net.Conn, net/http):
//
//	probe socket (SO_MARK=Mark, bound to Source:port) ── connect VIP:port
//	  ─▶ ip rule fwmark Mark lookup Table ─▶ default dev <TUN>
//	  ─▶ the prober reads the TUN, finds the connection by its source port,
//	     wraps the packet (dsr.Encap4/GUE4/Encap6/GUE6) and sends it with
//	     a raw socket (IPPROTO_RAW: the outer header is the prober's)
//	  ─▶ egress interface ─▶ backend: decapsulates, VIP on loopback
//	  ◀─ VIP:port → Source:port, straight back (DSR), to the socket
//
// Dial registers the socket's port (chosen by the kernel at bind, read
// with getsockname) before the SYN leaves, and a connection's packets are
// forwarded until Options.Linger after it is closed (its FIN and last
// ACK). The answers are addressed to Source, an address of the box, so
// vipd's XDP program, which steers only packets to VIPs and NAT replies
// from backends, passes them to the kernel.
//
// # Host requirements
//
//   - Reverse-path filtering: the answer's source is the VIP, which the
//     box routes toward the clients, not out of the egress interface where
//     it arrives. Strict mode (rp_filter=1 on all or the egress interface;
//     the kernel takes the larger) drops it; New fails with ErrRPFilter
//     naming the sysctls. Loose mode (2) passes when the box has any route
//     to the VIP (its default route), 0 always. vipd does not change the
//     setting.
//   - Source must be an address the backends send to without passing
//     through vipd (normally the box's address on the egress side).
//   - Mark and Table must be free: New owns Table's default routes and the
//     rule of (Mark, Table, Priority), and removes such a rule left by a
//     process that died before it adds its own.
//
// The TUN device is not persistent: closing it (Close, or the process
// dying) deletes it and its routes. Kernel-generated packets that do not
// carry the socket's mark (a reset answering a segment for a closed port)
// follow the main table, toward the VIP's route.
//
// # Namespaces
//
// New works in the network namespace of the calling thread; Dial creates
// its sockets there too, from any goroutine, so a test can make a prober
// inside a namespace of its own. It needs CAP_NET_ADMIN and CAP_NET_RAW.
package tunprobe
