// Package offload finds the host setting that silently breaks NAT for local
// senders: a veth whose peer has TX checksum offload on.
//
// A veth hands its frames to the other end without completing the
// transport checksum when the sending end has TX checksumming on: the skb
// is CHECKSUM_PARTIAL, only the pseudo-header is summed, and finishing the
// sum is left to "the NIC", which on a veth never happens because nothing
// needs it inside the kernel. A frame that crosses into user space through
// AF_XDP (or AF_PACKET) loses that state, so vipd sees, rewrites and sends
// on a TCP segment whose checksum was never right. The backend drops it,
// nothing in vipd counts a drop, and the connection hangs. Physical NICs
// always deliver complete checksums; the problem is confined to senders on
// the same host — containers on veth, VMs on tap — and the fix is on the
// sending side: "ethtool -K PEER tx off" on the veth peer, run in the
// peer's network namespace. With it off the peer's transmit path completes
// every checksum (and segments in software), including for frames a bridge
// forwards through it from other containers.
//
// Check answers, for one interface in the caller's network namespace,
// whether it is a veth, where its peer is (this namespace or another one,
// by IFLA_LINK and IFLA_LINK_NETNSID), and whether the peer has TX
// checksumming on (SIOCETHTOOL ETHTOOL_GTXCSUM). A peer in another
// namespace is looked for among the named namespaces (/run/netns, as
// "ip netns" makes them) and then the namespaces of running processes
// (/proc/PID/ns/net, which covers containers), by comparing the id each
// has as seen from here (RTM_GETNSID) with the peer's IFLA_LINK_NETNSID.
// A peer whose namespace cannot be found or entered is a result
// (Report.PeerReachable false, with the reason), not an error: vipd warns
// and goes on. Report.Warning words the warning with the command that
// fixes it.
//
// SetTxChecksum turns the setting on or off (ETHTOOL_STXCSUM), for tests
// and test beds.
//
// # Sockets and network namespaces
//
// "Here" is the network namespace of the calling goroutine's OS thread, as
// in package arp: Check and SetTxChecksum open their sockets on the calling
// goroutine, so a caller that locked its thread into a namespace queries
// that namespace. To reach a peer in another namespace Check switches a
// separate, locked OS thread into it just long enough to open one socket,
// and switches it back; a thread that cannot be switched back is never
// unlocked, so the runtime discards it instead of reusing it.
package offload
