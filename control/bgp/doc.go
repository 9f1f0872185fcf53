// Package bgp is vipd's BGP speaker: it announces the host route of each
// VIP (/32, /128 through MP-BGP, RFC 4760) to the upstream routers, which
// spread flows over several vipd boxes by ECMP, and withdraws it when the
// box should no longer receive the VIP's traffic.
//
// The speaker is GoBGP (github.com/osrg/gobgp/v4) embedded as a library;
// vipd never speaks BGP itself. It is control plane only: it runs in its
// own goroutines, never in a dataplane worker, and never touches a packet.
// It imports nothing from the routers (every received route is rejected)
// and installs nothing in the kernel.
//
// The caller decides what is announced and hands the speaker the complete
// set of routes it wants (Set); a goroutine makes GoBGP's table match it,
// so Set never blocks on BGP. A peer that cannot be reached, refuses the
// session (a wrong AS) or fails TCP MD5 authentication is logged and
// counted, never an error of the speaker: GoBGP keeps retrying it.
//
// Stop withdraws everything (a CEASE NOTIFICATION drops the sessions, and
// the routers drop the routes at once), or, with graceful restart (RFC
// 4724) negotiated, closes the sessions without one so that the routers
// keep the routes for the restart time while vipd restarts.
package bgp
