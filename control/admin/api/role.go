package api

import "time"

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
