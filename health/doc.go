// Package health runs vipd's active health checks and turns their results
// into backend status: up or down with rise/fall hysteresis, draining (lame
// duck) when an HTTP check answers the configured drain status, and a
// slow-start ramp of the weight after a backend comes (back) up.
//
// A Checker is the pure state machine of one backend: it takes results and
// the time, and says what the backend's status is; it has no clock and no
// I/O, so every transition is tested with a fake clock. The Manager runs one
// goroutine per backend that probes it (TCP connect or HTTP GET) every
// interval, with jitter so that a thousand backends are not probed in
// lockstep, and reports status changes to the daemon, which builds a new
// snapshot. Nothing here touches a packet.
//
// A DSR backend is probed through its tunnel by default (probe =
// "tunnel"): its Target holds the VIP:port and the tunnel (a
// tunprobe.Path), and the Prober from NewProber dials it through a
// TunnelDialer (package tunprobe), so the check passes only when the
// backend decapsulates and holds the VIP, as its clients need.
//
// A backend's first check decides its first verdict with init_state
// "down" (the default; the daemon gives it no new flow before): a pass is
// up, a failure down, rather than taking the whole service down for
// rise × interval. With init_state "up" it starts up and a first failure
// counts toward fall. After that it goes down after fall failures in a row
// and comes back after rise successes in a row.
package health
