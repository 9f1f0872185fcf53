package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

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

// RoleSetter is what a Provider implements to serve POST /v1/role.
type RoleSetter interface {
	SetRole(role string) (*RoleAnswer, error)
}

// handleRole serves POST /v1/role on the admin socket.
func handleRole(p Provider) http.Handler {
	return jsonOnly(func(w http.ResponseWriter, r *http.Request) {
		rs, ok := p.(RoleSetter)
		if !ok {
			http.Error(w, "this vipd has no neighbor role", http.StatusNotImplemented)
			return
		}
		var req RoleRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<12))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || (req.Role != RoleActive && req.Role != RoleStandby) {
			http.Error(w, `want {"role": "active"|"standby"}`, http.StatusBadRequest)
			return
		}
		ans, err := rs.SetRole(req.Role)
		if err != nil {
			httpError(w, err)
			return
		}
		writeJSON(w, ans)
	})
}

// refuseRole answers POST /v1/role on a read-only listener.
func refuseRole(w http.ResponseWriter, _ *http.Request) {
	http.Error(w, "this listener is read-only: the role is switched on vipd's admin socket ([admin] socket) only; use `vipd active` or `vipd standby` as root", http.StatusForbidden)
}

// SetRole asks vipd, through its admin socket, to become active or
// standby.
func SetRole(ctx context.Context, socket, role string) (*RoleAnswer, error) {
	var a RoleAnswer
	return &a, postSocket(ctx, socket, "/v1/role", RoleRequest{Role: role}, &a)
}

// WriteRole prints a role change as `vipd active` and `vipd standby` show
// it.
func WriteRole(w io.Writer, a *RoleAnswer) {
	what := "answers ARP/NDP for %d VIP addresses (announced gratuitously when it became active)"
	if a.Role == RoleStandby {
		what = "forwards what reaches it; answers ARP/NDP for %d VIP addresses"
	}
	change := "was " + a.Previous
	if a.Previous == a.Role {
		change = "no change"
	}
	fmt.Fprintf(w, "%s since %s (%s): "+what+"\n", a.Role, a.Since.UTC().Format(time.RFC3339), change, a.Neighbors)
	if a.Routes != "" {
		fmt.Fprintf(w, "  BGP: %s\n", a.Routes)
	}
}

// writeJSON answers v as JSON.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
