// Package xdpprog is vipd's XDP steering program: it decides, for every
// frame a NIC queue receives, whether vipd's AF_XDP socket on that queue
// gets it or the kernel does, and, loaded with a fast path, forwards the
// frames of established flows itself. The program is assembled in Go with
// github.com/cilium/ebpf/asm (no C compiler, no object files) and loaded
// with its maps by Load. What the fast path does for an operator, when it
// runs and what it costs is in docs/operations.md, "The XDP fast path";
// where the program sits in the data path in docs/architecture.md.
//
// # The steering rule
//
// The rule is stated once, in Go, by dataplane.Snapshot.Claims
// (dataplane/claims.go has the text); this program is its BPF translation,
// and a differential test (diff_test.go) runs one corpus — every fuzz seed
// of the project plus generated frames — through both and fails on any
// frame they disagree on. A change to the rule is made to both, or the
// test fails. The program never drops: a frame is redirected to vipd (a
// VIP destination; a NAT reply not for a local address) or passed to the
// kernel (everything else: ARP and neighbour discovery, SSH and BGP to
// the box, replies to the box's own addresses).
//
// "Redirect" is bpf_redirect_map into the XSKMAP slot of the receive
// queue, with XDP_PASS as the verdict when that slot holds no socket
// (kernel 5.9 and later). A queue without a vipd socket therefore loses
// nothing: its frames reach the kernel as if vipd were not there.
//
// # Maps
//
// All addresses are 16 bytes, IPv4 as ::ffff:a.b.c.d, so one map holds
// both families. Update rewrites the steering sets while the program runs
// and fails with ErrCapacity past MaxVIPs, MaxLocal or MaxReplies.
//
//	vipd_vips      hash       addr[16]                            MaxVIPs, preallocated
//	vipd_local     hash       addr[16]                            MaxLocal, preallocated
//	vipd_replies   hash       addr[16] proto pad port(BE16)       MaxReplies, not preallocated
//	vipd_rhosts    hash       addr[16] proto pad 0                MaxReplies, not preallocated
//	vipd_xsks      xskmap     queue id → AF_XDP socket            one per queue
//	vipd_fast4     LRU hash   src dst sport dport proto pad[3]    Options.FastFlows
//	vipd_fast6     LRU hash   the same, 16-byte addresses         Options.FastFlows6 (none for 0)
//	vipd_fastgen   array      0 → generation                      1
//	vipd_faststat  per-CPU    0 → frames, bytes forwarded         1
//	vipd_fastref   array      counting slot → frames, bytes       MaxFastRefs (mmapped by vipd)
//
// vipd_rhosts is derived from the reply keys by Update and serves
// fragments, which carry no ports.
//
// # The fast path
//
// Loaded with Options.FastFlows, the program first tries to forward the
// frame itself, replaying a translation or encapsulation vipd's
// pipeline chose and handed down for one flow (Fast, Writer); every
// frame it does not take goes on to the steering rule unchanged. It
// takes a frame only under the conditions in which the pipeline would
// translate it straight away (classifyCommon and forwardClean in
// package dataplane; fastprog.go emits each check with its reason) and
// with an entry of the current generation, unexpired, for the interface
// the frame came in on; GUE over IPv6, whose UDP checksum covers the
// whole packet, stays with the workers.
//
// Its output is byte for byte the pipeline's: TestFastTranslates,
// TestFastTranslates6, TestFastEncap6 and TestFastChecksumSweep compare
// them; TestFastDeclines and TestFastDeclines6 give each condition a
// frame that fails only it; TestFastAgreesWithPipeline hands the
// program what a worker offers for each frame of the steering corpus
// and runs thousands of variants through both. Entries expire, so that
// vipd keeps seeing each flow, and a new generation
// (Fast.SetGeneration) retires all of them at once when what
// established flows' packets become changes. A second program, for
// another interface, may share the fast path's maps
// (Options.ShareFast): each entry names the interface its frames arrive
// on. The time is read with bpf_ktime_get_coarse_ns where the kernel
// has it (5.11), up to a tick late: Fast.ClockSlack.
//
// # Lifetime and kernel
//
// Load creates the program and maps; Attach links the program to an
// interface through a BPF link owned by this process; Close detaches and
// frees it all. Because BPF links and maps live only as long as their
// file descriptors, a vipd that dies leaves nothing in the kernel. Kernel
// requirements: 5.9 (BPF links for XDP and the redirect fallback). Before
// 5.11 the maps are charged to RLIMIT_MEMLOCK, which the caller must
// raise.
//
// testdata/*.asm are the emitted programs as text; TestGoldenListings
// holds the emitter to them, and -update rewrites them after a meant
// change (docs/architecture.md, "Where the tests hold it together").
package xdpprog
