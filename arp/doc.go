// Package arp gives the dataplane its layer-2 view of the world, off the
// packet path. It never touches a worker: it answers and asks on its own
// sockets and publishes what it learns for the control plane to compile into
// the next dataplane snapshot.
//
// It has two parts, the Responder and the Resolver, and OnLinkPrefixes.
//
// A Responder owns the VIP addresses at layer 2 on one interface. It answers
// ARP requests (RFC 826) for IPv4 VIPs with the interface's MAC address, and
// Neighbor Solicitations (RFC 4861 §7.2.4) for IPv6 VIPs with Neighbor
// Advertisements. When a VIP is added it announces it: ARP Announcements as
// RFC 5227 §2.3 describes them (an ARP request with sender and target
// protocol address both set to the VIP), and unsolicited Neighbor
// Advertisements (RFC 4861 §7.2.6), so that neighbors whose caches still hold
// another MAC for the VIP — a previous vipd box, say — switch at once. When
// another host claims one of its VIPs it defends it (RFC 5227 §2.4 (b)).
//
// OnLinkPrefixes reads the prefixes the kernel reaches directly on an
// interface (connected subnets). The links themselves — MAC, MTU, addresses,
// and their changes — are package linkwatch's.
//
// A Resolver finds the next-hop MAC address for backend addresses: a route
// lookup (RTM_GETROUTE) picks the gateway, or the address itself when it is
// on-link; the kernel's neighbor table answers when it holds a confirmed
// entry; otherwise the Resolver asks on the wire itself — an ARP request
// (RFC 826), or for IPv6 a Neighbor Solicitation to the solicited-node
// multicast address (RFC 4861 §7.2.2) — and waits a bounded time for the
// answer. It re-reads everything periodically and reports changes. Lookups are
// lock-free reads of an immutable result.
//
// # Sockets and network namespaces
//
// Every socket (AF_PACKET, rtnetlink) is opened by the goroutine that calls
// OnLinkPrefixes, Responder.Run or Resolver.Run, never
// by a goroutine they start. A caller that locked its OS thread into a network
// namespace therefore gets sockets in that namespace; the privileged tests
// rely on this.
//
// Frames are sent and received on AF_PACKET sockets that a classic BPF filter
// limits to what this package needs (ARP; ICMPv6 solicitations or
// advertisements), and that ignore the host's own outgoing frames.
package arp
