// Package decap is a user-space decapsulator for vipd's DSR mode: it takes
// the IPv4-in-IPv4 packets (RFC 2003) — and, optionally, IPv6-in-IPv6
// packets (RFC 2473) and GUE datagrams (draft-ietf-intarea-gue, variant
// 1: the IP packet directly after the UDP header) — that vipd sends to a
// backend, checks them, and hands the inner packets to the backend's own
// stack through a TUN device. It is what the kernel's ipip, ip6_tunnel and
// fou modules would do, for hosts that lack them. Over GUE it also reads
// vipd's previous-owner hint (a GUE variant 0 header, package dsr's
// format) and, with Options.Chain, sends a packet for a connection this
// host does not have on to the backend that had the flow before.
// cmd/vipd-decap is its command. How it works, why, and what was measured
// is in docs/decap.md; setting a backend up in docs/operations.md, "DSR
// backend setup".
//
// # Checks
//
// Each packet read is counted in Stats.Received and then once in
// Decapsulated, Hints[HintChainedOut] or Dropped by its Reason: the
// outer header is whole and of the tunnel's protocol; the outer source
// is in Options.AllowedSources (when set); the inner packet is of the
// tunnel's version (over GUE: of the outer family), its length fields
// add up to exactly what follows the outer header, and (IPv4) its
// header checksum is right; with Options.CheckLocal, its destination is
// an address of this host. A GUE datagram of a reserved variant, or a
// variant 0 header that is not a well-formed hint, is dropped. Receive
// offload: TCP segments the kernel's GRO merged are delivered with
// their checksum finished (Stats.Completed), merged UDP datagrams are
// dropped (DropMergedUDP); GUE datagrams are never merged for the GUE
// sockets. Nothing allocates per packet but Chain's kernel socket
// lookup, which is made once per flow and Options.ChainCacheTTL.
//
// A host reachable from outside a trusted network must set both
// AllowedSources and CheckLocal: otherwise anyone can have it deliver
// packets of any source to its stack and, over IPv6 on a host that
// forwards, to any other host (the TUN's IPv4 forwarding is off unless
// Options.Forwarding). Options.Chain needs Options.ChainPeers: a hinted
// packet is chained only to an address in it, and it is otherwise
// dropped (DropChainTarget); a chained packet (HintChained) is delivered
// where it arrives and never chained again.
//
// # Host changes
//
// New sets up, in the network namespace of the calling thread, what the
// TUN path needs, and Close undoes exactly what New did: the TUN device
// (not persistent: the kernel removes it when its file is closed, so
// also when the process dies); rp_filter 0 on the TUN, and on all,
// which must be 0 too: when it is not, New fails and names the command,
// unless Options.FixSysctls, with which New sets it after raising every
// other interface's own value so that only the TUN loses filtering;
// IPv6 disabled on the TUN unless Options.IPv6; forwarding off on the
// TUN unless Options.Forwarding, which Run keeps off when a host-wide
// write turns it on; and, with Options.VIPs, each VIP on loopback and
// net.ipv4.conf.all.arp_ignore=1 and arp_announce=2 where lower. A VIP
// or a sysctl that was already so stays after Close. Run re-reads the
// local addresses when the kernel announces a change and every
// Options.LocalRefresh.
//
// # Namespaces and privileges
//
// New needs CAP_NET_ADMIN (TUN device, sysctls, receive buffers, VIPs)
// and CAP_NET_RAW (raw sockets), and CAP_NET_BIND_SERVICE for a GUE port
// below 1024. Everything it opens — sockets, TUN device, the netlink
// socket that lists local addresses for CheckLocal, the sock_diag socket
// of Chain — belongs to the network namespace of the OS thread that calls
// it, and keeps working there when used from other threads: a test or a
// supervisor can lock a thread, setns into a namespace, call New, and
// switch back.
package decap
