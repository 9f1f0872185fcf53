// Package decap is a user-space decapsulator for vipd's DSR mode: it takes
// the IPv4-in-IPv4 packets (RFC 2003) — and, optionally, IPv6-in-IPv6
// packets (RFC 2473) and GUE datagrams (draft-ietf-intarea-gue, variant
// 1) — that vipd sends to a backend, checks them, and hands the inner
// packets to the backend's own stack through a TUN device. It is what the
// kernel's ipip, ip6_tunnel and fou modules would do, for hosts that lack
// them: kernels built without the modules, and containers that may not
// load modules. Over GUE it also understands vipd's previous-owner hint
// and, with Options.Chain, forwards a packet for a connection it does not
// have to the backend that had the flow before (see "Previous-owner
// hints"). cmd/vipd-decap is its command.
//
// # Data path
//
// vipd wraps the client's packet, untouched, in an outer header from its
// encapsulation address to the backend's address (IPv4: protocol 4, DF,
// TTL 64, no options; IPv6: next header 41). The kernel delivers that to
// a raw socket of protocol 4 (whole packets, outer header included) or,
// for IPv6, of protocol 41 (the payload after the outer header, the
// source in the socket address). The open raw socket also counts as the
// protocol's handler: without it the kernel answers vipd with ICMP
// "protocol unreachable" (IPv6: parameter problem) for every packet
// (measured: IcmpOutDestUnreachs and Icmp6OutParmProblems move without a
// Decap, stay 0 with one). The inner packet is written to the TUN device: the kernel
// receives it as if it had arrived on that interface, finds the VIP on
// loopback, and the backend's sockets answer the client directly with
// the VIP as source.
//
// Checks, each counted as a Reason in Stats: the outer header is whole
// and of protocol 4; the outer source is in Options.AllowedSources (when
// set); the inner packet is of the tunnel's version, its length fields
// add up to exactly what follows the outer header, and (IPv4) its header
// checksum is right; with Options.CheckLocal, its destination is an
// address of this host. Nothing allocates per packet. A host reachable
// from outside a trusted network must set both AllowedSources and
// CheckLocal: otherwise anyone can have it deliver packets of any source
// to its stack and, over IPv6 on a host that forwards, to any other
// host (the TUN's IPv4 forwarding is off; see "Host setup").
// cmd/vipd-decap refuses to start without -allow and checks local
// destinations unless told -check-local=false.
//
// # GUE
//
// For a VIP with encap = "gue", vipd puts the client's packet in a UDP
// datagram instead, so that the backend's NIC, which hashes the UDP ports
// for receive-side scaling, spreads flows over its queues (IPIP packets
// to one backend all have the same outer addresses and land on one
// queue). With Options.GUEPort set, Decap accepts exactly this:
//
//	outer IPv4: protocol 17, DF, TTL 64     outer IPv6: next header 17
//	UDP: source port 49152 + (flow hash mod 16384), destination port
//	     GUEPort (vipd's default 6080, DefaultGUEPort, as Katran's);
//	     checksum 0 over IPv4, a valid checksum over IPv6
//	payload: the client's IP packet, nothing before it (GUE variant 1:
//	     the first two bits are 01, the top of IP version 4 or 6)
//
// It receives them on UDP sockets bound to the port (IPv6 with
// Options.IPv6), Options.GUESockets per family in an SO_REUSEPORT group,
// each read by its own goroutine: the kernel picks a socket by a hash of
// the datagram's addresses and ports, so a flow keeps its socket (and its
// order) while flows spread over sockets and cores — the backend's share
// of what the varying source port is for (TestGUESpread: 32 flows over
// 4 sockets, each flow on one). IPIP cannot be spread so: every raw
// socket of a protocol receives its own copy of each packet, so there is
// one, read by one goroutine, however vipd varies the outer source
// (encap_source_prefix). A second group cannot join: New first
// binds a plain socket for a moment, which fails if the port is taken.
// The kernel checks the UDP checksum when there is one
// (measured: a corrupted IPv6 datagram is counted in Udp6InCsumErrors and
// never reaches the socket), reassembles fragments, and returns the
// payload with the outer source. The open socket is also the port's
// listener: no ICMP port unreachable goes back to vipd (Udp NoPorts stays
// 0). The checks are the IPIP path's, plus the variant (DropGUEVariant: a
// reserved variant, 10 or 11; a GUE header, variant 0, is accepted only
// as vipd's previous-owner hint, below) and an empty datagram
// (DropMalformed). The inner family must be the outer one, as over IPIP:
// vipd never sends IPv6 inside IPv4 GUE or the reverse, though GUE would
// allow it. Stats.GUE counts the datagrams received.
//
// # Previous-owner hints
//
// Every vipd box builds the same Maglev table, so a flow that moves
// between boxes keeps its backend, unless the backend set changed: then a
// packet that misses the new box's connection table (after an ECMP
// rehash, a restart, an eviction) is hashed into the new table and may
// land on a backend that never saw its connection, which answers with a
// reset. vipd keeps each VIP's previous table; for such a packet (not a
// connection start) whose owner differs between the tables, it sends the
// packet to the current owner and names the previous one in the GUE
// header (Beamer's "daisy chaining", GLB's "second chance"; issue 18):
//
//	outer IPv4 or IPv6, UDP to the GUE port, as for variant 1, then
//	byte 0     00 (variant 0), C 0, Hlen: 2 (inner IPv4) or 5 (IPv6) words
//	byte 1     Proto/ctype: 4 (inner IPv4) or 41 (inner IPv6)
//	bytes 2-3  flags 0: no extension fields
//	Hlen*4 bytes of private data (what follows the flag-indicated fields):
//	  0x76 0x70 ("vp"), kind 1 (previous owner), hint flags (0x01:
//	  HintChained), the previous owner's address, 4 or 16 bytes, of
//	  the inner packet's family
//	the inner packet
//
// vipd writes it with dsr.GUEHint4 and GUEHint6, whose constants the
// parser shares; TestHintFromEncap runs the encoder's output through it.
// Anything else in a variant 0 header is dropped: a control message,
// flags, another Proto/ctype or Hlen, a datagram that ends inside the
// header, an inner packet of another version than Proto/ctype says
// (DropGUEHeader); another magic or kind, unknown hint flags, an owner
// address that cannot be a backend (DropHint). A hinted packet then
// passes the same inner checks as any other.
//
// With Options.Chain off, a hinted packet is delivered as if it had no
// hint (HintOff). With it on, vipd-decap decides, in this order:
//
//   - HintChained set: another backend chained it here; delivered, and
//     never chained again, so no packet travels more than one extra hop
//     (HintChainedIn).
//   - A connection start, TCP SYN without ACK: delivered (HintSYN). vipd
//     sends none with a hint; a SYN from anywhere also forgets the
//     flow's cached decision.
//   - No ports to look up (not TCP or UDP, a fragment, IPv6 extension
//     headers): delivered (HintNoPorts).
//   - A local socket connected to the inner source: delivered
//     (HintMatch). The local end is the inner destination address and
//     port, the remote end its source. The kernel is asked with one
//     NETLINK_SOCK_DIAG exact-match query (SOCK_DIAG_BY_FAMILY with an
//     inet_diag_req_v2, no NLM_F_DUMP; the socket of the namespace New
//     ran in), never a walk of /proc. That query falls back, like the
//     receive path, to a listening TCP socket or an unconnected UDP
//     socket when nothing connected matches; such a socket reports peer
//     0:0, so only a reply naming the inner source counts. For UDP
//     this means only connected sockets keep a flow here: which UDP
//     flows vipd hints is its own rule.
//   - The lookup failed: delivered (HintLookupError): a broken lookup
//     must not black-hole traffic.
//   - Otherwise, when the previous owner is not in Options.ChainPeers,
//     the packet is dropped (DropChainTarget): the hint is the packet's
//     word, and chained to any address it would make this host a
//     reflector toward every GUE port; and a ChainPeers that lacks a
//     backend vipd knows shows in this counter. Chain needs ChainPeers.
//   - Otherwise the datagram is sent on as received, with HintChained
//     set, over UDP to the previous owner's GUEPort (every backend is
//     assumed to use the same port), from the GUE socket that received
//     it: its source is this host's address and the port GUEPort, so
//     the previous owner's kernel puts all chained packets from one
//     peer on one of its GUE sockets (order kept; spread lost, which a
//     transition's trickle does not need). IPv6 gets a UDP checksum from
//     the kernel. (HintChainedOut; a failed send is DropChainSend.)
//
// The previous owner accepts the chained packet although its outer
// source is a backend, not vipd: Options.ChainPeers, the other backends,
// are also the outer sources accepted for packets with HintChained only;
// Options.AllowedSources still governs everything else.
//
// A flow whose every packet carries a hint (vipd's connection entry
// remembers it) would cost a kernel query per packet (measured: 15 µs
// and 38 allocations per query, BenchmarkSockDiag). The decision is
// remembered per 5-tuple for Options.ChainCacheTTL (default 1 s) in a
// fixed array of Options.ChainCache slots with striped locks, so a
// hinted packet decided from it costs about 140 ns more than a variant 1
// datagram and allocates nothing (BenchmarkHinted, TestHintedDoesNotAllocate).
// Lookup errors are not remembered.
//
// Counters: Stats.Hinted counts the well-formed hinted datagrams that
// passed the inner checks; each ends in one of Stats.Hints (by
// HintOutcome), Dropped[DropChainTarget] or Dropped[DropChainSend]. Stats.Lookups counts kernel
// queries, Stats.CacheHits the decisions the cache made. Every packet
// read is counted in Received and once in Decapsulated,
// Hints[HintChainedOut] or Dropped.
//
// # Receive offload (GRO)
//
// The kernel's GRO understands IPIP and IPv6-in-IPv6 even without the
// tunnel modules, so on an interface with GRO on (the default on real
// NICs; off on veth) consecutive segments of one tunnelled flow reach
// the raw socket merged into one packet of up to 64 KiB. The inner
// lengths are fixed up, but the TCP or UDP checksum field holds only the
// pseudo-header sum, meant to be finished later. Written to the TUN as
// is, the packet fails the kernel's checksum check. Measured on Linux
// 6.18 with GRO on a veth: 40 segments arrived as one 40040-byte packet,
// and without repair TcpInCsumErrors counted it.
//
//   - TCP segments are repaired: the checksum is finished (Stats.Completed)
//     and the merged segment is delivered, which TCP accepts.
//   - UDP datagrams are merged only when the backend's socket asked for
//     UDP_GRO (QUIC servers do) or the interface forwards UDP GRO. They
//     cannot be split again without the segment size, which a raw socket
//     does not return; they are dropped as DropMergedUDP. On such hosts
//     turn GRO off on the interface vipd's packets arrive on
//     (ethtool -K IFACE gro off).
//
// GUE is not merged at all: GRO merges UDP datagrams only for a socket
// that enabled UDP_GRO or one with its own GRO handler (the kernel's fou
// sockets), and the GUE socket is neither (fraglist GRO, where a device
// has it on, is split again before a socket without UDP_GRO: so the
// kernel's code reads; not measured). Measured on Linux 6.18
// with GRO on a veth (TestTCPTransfer): 4 MiB of TCP came as 3029
// datagrams over GUE, none merged, against 161 packets, 86 of them
// merged, over IPIP.
//
// # Host setup
//
// New does what the TUN path needs, in the namespace of the calling
// thread, and Close undoes it (measured on Linux 6.18, no ipip module):
//
//   - net.ipv4.conf.<tun>.rp_filter=0 and net.ipv4.conf.all.rp_filter=0.
//     The inner source is a client whose route points elsewhere, and the
//     kernel filters with the maximum of all and the interface. Loose mode
//     (2) does not help: on an interface without an IPv4 address it drops
//     too (TcpExtIPReversePathFilter counted the SYN with all=2 and with
//     <tun>=2; all=1 likewise). When all is not 0, New fails and names the
//     command, unless Options.FixSysctls: then New sets all=0 after
//     raising every other interface's own rp_filter (and default's) to the
//     old value of all, so that only the TUN loses filtering; Close puts
//     all of them back.
//   - net.ipv6.conf.<tun>.disable_ipv6: 0 with Options.IPv6, else 1 (no
//     router solicitations or MLD reports into a device nobody reads).
//     IPv6 has no reverse-path filter to turn off.
//   - net.ipv4.conf.<tun>.forwarding=0 and, with Options.IPv6,
//     net.ipv6.conf.<tun>.forwarding=0 and force_forwarding=0 (Linux
//     6.17 and later), unless Options.Forwarding. A new interface takes
//     forwarding from default, which is 1 on every host that forwards
//     (Docker and Kubernetes nodes), and IPv4 is forwarded only when the
//     input interface's forwarding is on: with it off, an inner packet
//     not addressed to this host (without CheckLocal) is dropped by the
//     kernel, counted in Ip InAddrErrors, never routed on and never
//     answered with an ICMP error (TestTUNForwarding). A write that
//     turns net.ipv4.ip_forward from 0 to 1, and any write of
//     net.ipv6.conf.all.forwarding, copies the value onto every
//     interface: Run checks every LocalRefresh and sets it back to 0,
//     logging it. IPv6 forwarding ignores the input interface's
//     forwarding (measured on Linux 6.18: a packet arriving on an
//     interface with forwarding=0 was forwarded while all.forwarding
//     was 1), so for IPv6 only CheckLocal keeps the host from relaying;
//     New logs a warning when CheckLocal is off and all.forwarding on.
//   - accept_local stays 0: it matters only when the inner source is an
//     address of the backend itself (measured: such a SYN was dropped as
//     a martian source with 0 and accepted with 1). Set
//     net.ipv4.conf.<tun>.accept_local=1 by hand if the backend must be
//     its own client through vipd.
//   - The TUN device is not persistent: the kernel removes it when its
//     file is closed, by Close or by the process dying.
//
// The backend itself needs, as with the kernel module: the VIP on
// loopback (ip addr add VIP/32 dev lo; IPv6: VIP/128) and ARP kept quiet
// about it, net.ipv4.conf.all.arp_ignore=1 and
// net.ipv4.conf.all.arp_announce=2, so that it neither answers ARP for
// the VIP nor uses the VIP as the source of its own ARP requests. With
// Options.VIPs New does both, and Close undoes exactly what New did:
//
//   - each VIP is added to lo through rtnetlink, as ip addr add does (an
//     IPv6 one with nodad: without it the address stays tentative, and
//     no server can bind it, until the kernel's duplicate address
//     detection work has run, which on a busy host takes a while even
//     on lo); one already there (same address and prefix length) is
//     left alone and stays after Close, and one removed by hand
//     meanwhile is no error;
//   - all.arp_ignore and all.arp_announce are raised to 1 and 2 when
//     lower, and put back by Close unless someone changed them since.
//     The kernel applies the maximum of all and the interface's value to
//     both, so all covers every interface (lo's own values need no
//     change) and a stricter value found is kept. IPv6 needs nothing of
//     the kind: the kernel answers neighbour solicitations only for
//     addresses of the interface they arrive on, never lo's.
//
// The VIPs are added before the local address set is first read, so
// CheckLocal accepts them from the first packet. Addresses added later
// are seen when the kernel announces the change (the IPv4 and IPv6
// ifaddr netlink groups, TestLocalRefresh), and the set is re-read every
// LocalRefresh in any case, for a notification lost to a full socket
// buffer.
//
// # Namespaces and privileges
//
// New needs CAP_NET_ADMIN (TUN device, sysctls, receive buffers, VIPs)
// and CAP_NET_RAW (raw sockets), and CAP_NET_BIND_SERVICE for a GUE port
// below 1024. Everything it opens — sockets, TUN device, the netlink
// socket that lists local addresses for CheckLocal, the sock_diag socket
// of Chain — belongs
// to the network namespace of the OS thread that calls it, and keeps
// working there when used from other threads: a test or a supervisor can
// lock a thread, setns into a namespace, call New, and switch back.
package decap
