package api

import "time"

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
	// Since is when the override last changed.
	Since time.Time `json:"since"`
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
