package api

import "time"

// BGPState is the BGP speaker in State; nil when vipd runs without [bgp].
type BGPState struct {
	ASN      uint32 `json:"asn"`
	RouterID string `json:"router_id"`
	// Box is "announcing", "draining" (lame duck: everything withdrawn,
	// still forwarding until LingerUntil) or "drained".
	Box         string         `json:"box"`
	LingerUntil time.Time      `json:"linger_until,omitzero"`
	Peers       []BGPPeerState `json:"peers"`
}

// BGPPeerState is one peer's session.
type BGPPeerState struct {
	Address string    `json:"address"`
	ASN     uint32    `json:"asn"`
	State   string    `json:"state"` // idle, connect, active, opensent, openconfirm, established
	Since   time.Time `json:"since"`
	// LastError is why the session last went down or failed, if it did.
	LastError string `json:"last_error,omitempty"`
}

// BGPStates lists the session states, in the FSM's order (RFC 4271 §8).
var BGPStates = []string{"idle", "connect", "active", "opensent", "openconfirm", "established"}
