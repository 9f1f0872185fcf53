package admin

import (
	"encoding/json"
	"net/http"

	"github.com/vipd/vipd/control/admin/api"
)

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
