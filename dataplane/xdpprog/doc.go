// Package xdpprog is vipd's XDP steering program: it decides, for every
// frame a NIC queue receives, whether vipd's AF_XDP socket on that queue
// gets it or the kernel does. The program is assembled in Go with
// github.com/cilium/ebpf/asm (no C compiler, no object files) and loaded
// with its maps by Load.
//
// # The steering rule
//
// The rule is stated once, in Go, by dataplane.Snapshot.Claims (see
// dataplane/claims.go for the text); this program is its BPF translation,
// and a differential test (diff_test.go) runs one corpus — every fuzz seed
// of the project plus generated frames — through both and fails on any
// frame they disagree on. In short, per frame:
//
//  1. Ethernet, with at most one 802.1Q tag. Any EtherType but IPv4 and
//     IPv6 (ARP, LLDP, 802.1ad double tags, ...) passes to the kernel.
//  2. IPv4 (the IHL is honoured; options are skipped) or the fixed IPv6
//     header. Malformed headers (wrong version, IHL < 5, frame shorter
//     than the header) pass. IPv6 packets whose source or destination is
//     IPv4-mapped pass, so they can never alias an IPv4 entry, and so does
//     neighbour discovery (ICMPv6 133–137 directly after the fixed header):
//     vipd answers it for its VIPs from an AF_PACKET socket (package arp),
//     and such a socket sees only what XDP passes.
//  3. Destination address in the VIP set: redirect, every protocol (the
//     pipeline decides, and counts what it drops).
//  4. Otherwise, if the destination is not a local address and the packet
//     is a NAT reply (below): redirect.
//  5. Everything else passes. The program never drops.
//
// A NAT reply is one of:
//
//   - a TCP or UDP packet, whole or a first fragment (IPv4 offset 0; IPv6
//     offset 0 with a Fragment header directly after the fixed header),
//     whose (source address, protocol, source port) or (source address,
//     protocol, 0) is a ReplyKey;
//   - a later TCP or UDP fragment (IPv6: Fragment header directly after the
//     fixed header), whose (source address, protocol) belongs to any
//     ReplyKey: it carries no ports;
//   - an ICMP error vipd relays (packet.ICMPv4FlowErrors; ICMPv6 types
//     1–4), not fragmented, quoting a TCP or UDP packet whose
//     (destination, protocol, destination port), or (destination,
//     protocol, 0), is a ReplyKey: an error from a NAT backend, or a router
//     in front of it, about a client's packet, on its way to the client.
//     Without it a NAT client would never learn the path MTU towards a
//     backend.
//
// So the kernel keeps everything that is not vipd's: ARP and neighbour
// discovery (for VIPs too), SSH and BGP to the box, pings to the box, and
// replies to the box's own addresses (health checks of the same backends),
// because rule 4 never fires for a local destination. IPv6 packets with
// extension headers other than a leading Fragment header are steered only
// by a VIP destination; a NAT reply carrying them goes to the kernel.
//
// "Redirect" is bpf_redirect_map into the XSKMAP slot of the receive
// queue, with XDP_PASS as the verdict when that slot holds no socket
// (kernel 5.9 and later). A queue without a vipd socket therefore loses
// nothing: its frames reach the kernel as if vipd were not there.
//
// # Maps
//
// All addresses are 16 bytes, IPv4 as ::ffff:a.b.c.d, so one map holds
// both families. Values are one byte. The VIP and local maps are
// preallocated; the reply maps allocate entries as they are added (see
// MaxReplies).
//
//	vipd_vips     hash  addr[16]                          4096 entries
//	vipd_local    hash  addr[16]                           256 entries
//	vipd_replies  hash  addr[16] proto pad port(BE16)   262144 entries, not preallocated
//	vipd_rhosts   hash  addr[16] proto pad 0            262144 entries, not preallocated
//	vipd_xsks     xskmap queue id → AF_XDP socket       queues entries
//
// vipd_rhosts is derived from the reply keys by Update and serves the
// fragment rule.
//
// # The fast path
//
// Loaded with Options.FastFlows, the program first tries to forward the
// frame itself, replaying a translation or encapsulation vipd's pipeline
// chose and handed down for one flow (Fast, Writer); every frame it does not take goes on
// to the steering rule above unchanged. It takes a frame only when all of
// these hold, which are the conditions under which the pipeline would
// translate it straight away (classifyCommon and forwardClean in package
// dataplane):
//
//   - untagged Ethernet, IPv4 without options (first byte 0x45), not a
//     fragment, TTL above 1, a valid header checksum;
//   - TCP or UDP whose headers fit the total length, and a total length
//     that fits the frame (packet.ParseCommon's checks); TCP without FIN,
//     SYN or RST, which change the flow's state;
//   - an entry for (source, destination, source port, destination port,
//     protocol) in vipd_fast4 whose generation is the one in vipd_fastgen,
//     which has not expired (bpf_ktime_get_ns), whose interface (In) is
//     the one the frame came in on, and whose MaxLen the total length
//     does not exceed.
//
// It then drops Ethernet padding (bpf_xdp_adjust_tail) as the pipeline
// does, and either rewrites the frame as nat.DNAT4Sum does (destination
// address and port, TTL, both checksums from sums computed ahead), or as
// nat.SNAT4 does for a NAT backend's reply (FastEntry4.SNAT: the source
// address and port; natReply4 in package dataplane), or, for a DSR flow
// (FastEntry4.Encap), makes room in front (bpf_xdp_adjust_head) for an
// outer IPv4 header as dsr.Encap4 writes it (the flow's own source when
// the VIP has a source prefix), or for the outer header and UDP as
// dsr.GUE4 does (FastEntry4.GUE); it writes the next hop's Ethernet
// addresses, counts the frame (in all and for its backend), and sends it
// back out (XDP_TX) or to the entry's interface (bpf_redirect).
//
// IPv6 frames of a NAT VIP's flows and of its backends' replies, and of
// a DSR VIP's flows in IPv6 in IPv6, take the same way through vipd_fast6
// (FastKey6, FastEntry6): untagged, the fixed
// header directly followed by TCP or UDP (no extension headers, so no
// fragments), hop limit above 1, a payload length that covers the
// transport header and fits the frame, the same TCP and UDP length
// checks, a UDP checksum that is not 0 (which IPv6 forbids: the pipeline
// drops it), and the same entry conditions with MaxLen against 40 + the
// payload length; the rewrite is nat.DNAT6's or nat.SNAT6's (address,
// port, the transport checksum from nat.Sums6, computed ahead) and the hop
// limit decremented, or the outer header dsr.Encap6 writes (the inner
// traffic class, the flow's label and outer source; TestFastEncap6). GUE
// over IPv6, whose UDP checksum covers the whole packet, stays with the
// workers.
//
// The result is byte for byte the pipeline's (TestFastTranslates,
// TestFastTranslates6, TestFastEncap6, TestFastChecksumSweep for both
// families); each condition has a
// frame that fails only it (TestFastDeclines, TestFastDeclines6); and a differential test hands the program what a
// worker offers for each frame of the steering corpus, then runs thousands
// of variants of those frames through both: the program leaves a variant
// alone or forwards it exactly as a worker does
// (TestFastAgreesWithPipeline).
//
// Entries expire so that vipd keeps seeing each flow: the first frame
// after an entry's Expires goes through the pipeline, which tracks the
// flow as alive and renews the entry. A generation retires every entry at
// once: vipd moves to a new one whenever what established flows' packets
// become changes (a backend down, an address, a MAC, a VIP's settings;
// not a weight or a drain), and entries computed under the old one are
// ignored from that moment.
//
//	vipd_fast4     LRU hash   src dst sport dport proto pad[3] → 56-byte entry  FastFlows entries
//	vipd_fast6     LRU hash   the same, 16-byte addresses      → 88-byte entry  FastFlows6 entries (none for 0)
//	vipd_fastgen   array      0 → generation                                     1 entry
//	vipd_faststat  per-CPU    0 → frames, bytes forwarded                        1 entry
//	vipd_fastref   array      counting slot → frames, bytes (mmapped by vipd)    MaxFastRefs entries
//
// A second program, for another interface, may share them all
// (Options.ShareFast): a two-armed vipd's clients' packets arrive on one
// interface, its NAT backends' replies on the other, and one map of flows
// serves both, each entry for its interface (In).
//
// # Lifetime
//
// Load creates the program and maps; Attach links the program to an
// interface through a BPF link owned by this process; Update rewrites the
// sets while the program runs (see its transient); Close detaches and
// frees it all. Because BPF links and maps live only as long as their
// file descriptors, a vipd that dies leaves nothing in the kernel either.
//
// The fast path reads the time with bpf_ktime_get_coarse_ns where the
// kernel has it (5.11), a third cheaper per frame than bpf_ktime_get_ns
// (BenchmarkFast), and then up to a tick late: Fast.ClockSlack.
//
// # Golden listings
//
// testdata/*.asm are the emitted programs as text, each block headed by
// the builder method that emitted it; TestGoldenListings holds the
// emitter to them, and -update rewrites them after a meant change.
//
// Kernel requirements: 5.9 (BPF links for XDP and the redirect fallback).
// Before 5.11 the maps are charged to RLIMIT_MEMLOCK, which the caller
// must raise.
package xdpprog
