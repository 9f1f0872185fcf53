package admin

import (
	"encoding/json"
	"net/http"

	"github.com/vipd/vipd/control/admin/api"
)

// RoleSetter is what a Provider implements to serve POST /v1/role.
type RoleSetter interface {
	SetRole(role string) (*api.RoleAnswer, error)
}

// handleRole serves POST /v1/role on the admin socket.
func handleRole(p Provider) http.Handler {
	return jsonOnly(func(w http.ResponseWriter, r *http.Request) {
		rs, ok := p.(RoleSetter)
		if !ok {
			http.Error(w, "this vipd has no neighbor role", http.StatusNotImplemented)
			return
		}
		var req api.RoleRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<12))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || (req.Role != api.RoleActive && req.Role != api.RoleStandby) {
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

// writeJSON answers v as JSON.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
