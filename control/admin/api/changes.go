package api

import (
	"time"
)

// The bodies of the changes, served on the admin socket only: drains,
// run-time overrides, reload and the neighbor role; each request and the
// answer to it.

// DrainRequest is the body of POST /v1/drain.
type DrainRequest struct {
	VIP     string `json:"vip"`
	Backend string `json:"backend"`
	Drain   *bool  `json:"drain"`
	// Reason is why (vipd drain -reason), kept with the drain's event.
	Reason string `json:"reason,omitempty"`
}

// Box drain states (BGPState.Box, BoxDrainAnswer.Box).
const (
	BoxAnnouncing = "announcing"
	BoxDraining   = "draining"
	BoxDrained    = "drained"
)

// BoxDrainRequest is the body of POST /v1/drain-box.
type BoxDrainRequest struct {
	Undo bool `json:"undo"`
}

// BoxDrainAnswer is the answer of POST /v1/drain-box.
type BoxDrainAnswer struct {
	Box         string    `json:"box"` // BoxAnnouncing, BoxDraining or BoxDrained
	LingerUntil time.Time `json:"linger_until,omitzero"`
}

// Run-time overrides (vipd weight, vipd disable, vipd enable): changes to
// a backend that the daemon holds on top of the file, like HAProxy's
// "set weight" and "disable server". They are served on the admin socket
// only (POST /v1/override), like drains.

// Override is a backend's run-time override in State (BackendState.
// Override): what the operator set over the admin socket in place of the
// file's weight or state, in force until undone.
type Override struct {
	// Weight replaces the configured weight (0: the backend takes no new
	// flows); nil: the file's weight.
	Weight *uint32 `json:"weight,omitempty"`
	// Disabled: the backend takes no flows at all, as though the file
	// said state = "disabled".
	Disabled bool `json:"disabled,omitempty"`
	// Since is when the override last changed; Reason why, as given
	// with it (-reason).
	Since  time.Time `json:"since"`
	Reason string    `json:"reason,omitempty"`
}

// OverrideRequest is the body of POST /v1/override: one change to one
// backend, named as ResolveVIP and ResolveBackend read names.
type OverrideRequest struct {
	VIP     string `json:"vip"`
	Backend string `json:"backend"`
	// Exactly one of Weight (set it), ResetWeight (back to the file's) and
	// Disabled (true: disable, false: enable) is given.
	Weight      *uint32 `json:"weight,omitempty"`
	ResetWeight bool    `json:"reset_weight,omitempty"`
	Disabled    *bool   `json:"disabled,omitempty"`
	// Reason is why (-reason), kept with the override and its event.
	Reason string `json:"reason,omitempty"`
}

// OverrideAnswer is the answer of POST /v1/override: the backend as
// resolved, the file's say and the override now in force.
type OverrideAnswer struct {
	VIP     string `json:"vip"`     // the VIP's name
	Backend string `json:"backend"` // ADDR:PORT, or ADDR for port 0
	// FileWeight and FileState are what the configuration file says.
	FileWeight uint32 `json:"file_weight"`
	FileState  string `json:"file_state"`
	// Override is what is in force now; nil: nothing, the file rules.
	Override *Override `json:"override,omitempty"`
	// Note says what the operator should know: the change was already in
	// force, or it is not kept across restarts.
	Note string `json:"note,omitempty"`
}

// ReloadResult is the answer of POST /v1/reload: what the reload changed,
// or every reason it was refused (then the running configuration stays).
type ReloadResult struct {
	OK   bool   `json:"ok"`
	File string `json:"file"`
	// What an applied reload changed.
	VIPsAdded       []string     `json:"vips_added,omitempty"`
	VIPsRemoved     []string     `json:"vips_removed,omitempty"`
	BackendsAdded   []BackendRef `json:"backends_added,omitempty"`
	BackendsRemoved []BackendRef `json:"backends_removed,omitempty"`
	Reweighted      []Reweight   `json:"reweighted,omitempty"`
	// Changed are the other keys that differ, each as
	// `[table] key changed (old → new)`.
	Changed []string `json:"changed,omitempty"`
	// Errors, of a refused reload, one entry each: "file:line: key:
	// message" for the file's errors, `[table] key changed (old → new):
	// needs a restart` for a key a reload cannot apply.
	Errors []string `json:"errors,omitempty"`
	// Warnings about the new file (legal but questionable settings).
	Warnings []string `json:"warnings,omitempty"`
}

// BackendRef names a backend of a VIP: Backend is "addr:port", or
// "addr" for one that keeps the client's port.
type BackendRef struct {
	VIP     string `json:"vip"`
	Backend string `json:"backend"`
}

// Reweight is a backend whose configured weight a reload changed.
type Reweight struct {
	BackendRef
	Old uint32 `json:"old"`
	New uint32 `json:"new"`
}

// Roles a box has (State.Role; [dataplane] neighbor_role).
const (
	RoleActive  = "active"
	RoleStandby = "standby"
)

// RoleRequest is the body of POST /v1/role.
type RoleRequest struct {
	Role string `json:"role"` // RoleActive or RoleStandby
}

// RoleAnswer is what POST /v1/role answers: the role now, the one before,
// since when the box has the role, and how many VIP addresses it answers
// ARP/NDP for now (0 in standby).
type RoleAnswer struct {
	Role      string    `json:"role"`
	Previous  string    `json:"previous"`
	Since     time.Time `json:"since"`
	Neighbors int       `json:"neighbor_vips"`
	// Routes says what happens over BGP: "" without [bgp].
	Routes string `json:"routes,omitempty"`
}

// Event is one entry of the event log (GET /v1/events): what happened to
// the balancer, when, to what, by whom and why.
type Event struct {
	Seq  uint64    `json:"seq"` // from 1, in order
	Time time.Time `json:"time"`
	// Kind is one of the Event* kinds.
	Kind    string `json:"kind"`
	VIP     string `json:"vip,omitempty"`
	Backend string `json:"backend,omitempty"`
	// What happened, in words ("up → down: connect: connection refused",
	// "weight 5", the reload's changes).
	What string `json:"what"`
	// By is who made the change: the admin socket's caller ("uid 0 pid
	// 4242 (vipd)"), an operator's user@host for the fleet's overrides,
	// or "" for vipd's own doing; Reason the -reason given with it.
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Event kinds.
const (
	EventHealth   = "health"    // a backend's check verdict changed
	EventEjection = "ejection"  // passive outlier detection ejected or returned a backend
	EventDrain    = "drain"     // a backend drained or undrained by the admin API
	EventOverride = "override"  // a weight, disable or enable override
	EventReload   = "reload"    // a configuration applied or refused
	EventRole     = "role"      // the box became active or standby
	EventBGP      = "bgp"       // a BGP session went up or down
	EventFleet    = "fleet"     // a fleet revision applied or refused
	EventAdmin    = "admin"     // a change through the admin socket, with its caller
	EventMaxFlows = "max_flows" // a backend reached its max_flows, or went back under
)

// EventsAnswer is the answer of GET /v1/events?since=N: the events after
// sequence number N, oldest first; Missed counts those after N that fell
// off the log before they were read; Last is the newest's number.
type EventsAnswer struct {
	Events []Event `json:"events"`
	Missed uint64  `json:"missed,omitempty"`
	Last   uint64  `json:"last"`
}
