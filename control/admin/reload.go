package admin

import (
	"encoding/json"
	"net/http"

	"github.com/vipd/vipd/control/admin/api"
)

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
