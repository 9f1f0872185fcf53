package admin

import (
	"encoding/json"
	"net/http"

	"github.com/vipd/vipd/control/admin/api"
)

// The changes the admin socket serves besides drains (server.go, bgp.go):
// run-time overrides, reload and the neighbor role. Each handler is made
// only for a Control listener; a read-only one gets the refusal beside it.

// Run-time overrides (vipd weight, vipd disable, vipd enable): changes to
// a backend that the daemon holds on top of the file, like HAProxy's
// "set weight" and "disable server". They are served on the admin socket
// only (POST /v1/override), like drains.

// validOverride reports whether r asks for exactly one change.
func validOverride(r *api.OverrideRequest) bool {
	n := 0
	for _, b := range []bool{r.Weight != nil, r.ResetWeight, r.Disabled != nil} {
		if b {
			n++
		}
	}
	return n == 1 && r.VIP != "" && r.Backend != ""
}

// Overrider is a Provider that takes run-time overrides.
type Overrider interface {
	// SetOverride applies req; errors wrap api.ErrNotFound (no such VIP
	// or backend), api.ErrConflict (the file decides, not an override) or
	// api.ErrInvalid (a request that makes no sense).
	SetOverride(req api.OverrideRequest) (*api.OverrideAnswer, error)
}

// overrideReadOnly answers POST /v1/override on a read-only listener.
func overrideReadOnly(w http.ResponseWriter, _ *http.Request) {
	http.Error(w, "this listener is read-only: overrides are served on vipd's admin socket ([admin] socket) only; use `vipd weight`, `vipd disable` or `vipd enable` as root", http.StatusForbidden)
}

// handleOverride serves POST /v1/override on the admin socket.
func handleOverride(p Provider) http.Handler {
	return jsonOnly(func(w http.ResponseWriter, r *http.Request) {
		var req api.OverrideRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || !validOverride(&req) {
			http.Error(w, `want {"vip": NAME, "backend": "ADDR[:PORT]"} and one of "weight": N, "reset_weight": true, "disabled": true|false`, http.StatusBadRequest)
			return
		}
		o, ok := p.(Overrider)
		if !ok {
			http.Error(w, "this vipd takes no overrides", http.StatusNotImplemented)
			return
		}
		ans, err := o.SetOverride(req)
		if err != nil {
			httpError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(ans)
	})
}

// Reloader is a Provider that reloads its configuration file on request
// (POST /v1/reload, on the admin socket only).
type Reloader interface {
	// ReloadConfig reads the file again and applies it, or refuses it
	// (OK false). The error is for a reload that could not be tried at
	// all (vipd not running).
	ReloadConfig() (*api.ReloadResult, error)
}

// handleReload serves POST /v1/reload: 200 with the result when the
// reload applied, 422 with it when it was refused.
func handleReload(p Provider) http.Handler {
	return jsonOnly(func(w http.ResponseWriter, _ *http.Request) {
		rl, ok := p.(Reloader)
		if !ok {
			http.Error(w, "this vipd does not reload on request: send it SIGHUP", http.StatusNotImplemented)
			return
		}
		res, err := rl.ReloadConfig()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if !res.OK {
			w.WriteHeader(http.StatusUnprocessableEntity)
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(res)
	})
}

// refuseReload answers POST /v1/reload on a read-only listener.
func refuseReload(w http.ResponseWriter, _ *http.Request) {
	http.Error(w, "this listener is read-only: reloads are served on vipd's admin socket ([admin] socket) only; use `vipd reload` as root", http.StatusForbidden)
}

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
