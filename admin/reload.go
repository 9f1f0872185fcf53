package admin

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/vipd/vipd/admin/api"
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

// WriteReload prints what a reload changed, one line each, or, refused,
// every reason.
func WriteReload(w io.Writer, r *api.ReloadResult) {
	if !r.OK {
		fmt.Fprintf(w, "reload of %s refused: the running configuration stays\n", r.File)
		for _, e := range r.Errors {
			fmt.Fprintf(w, "  %s\n", e)
		}
		return
	}
	n := len(r.VIPsAdded) + len(r.VIPsRemoved) + len(r.BackendsAdded) + len(r.BackendsRemoved) + len(r.Reweighted) + len(r.Changed)
	if n == 0 {
		fmt.Fprintf(w, "reloaded %s: nothing changed\n", r.File)
		return
	}
	fmt.Fprintf(w, "reloaded %s:\n", r.File)
	for _, v := range r.VIPsAdded {
		fmt.Fprintf(w, "  + vip %q\n", v)
	}
	for _, v := range r.VIPsRemoved {
		fmt.Fprintf(w, "  - vip %q\n", v)
	}
	for _, b := range r.BackendsAdded {
		fmt.Fprintf(w, "  + backend %s of vip %q\n", b.Backend, b.VIP)
	}
	for _, b := range r.BackendsRemoved {
		fmt.Fprintf(w, "  - backend %s of vip %q\n", b.Backend, b.VIP)
	}
	for _, rw := range r.Reweighted {
		fmt.Fprintf(w, "  ~ backend %s of vip %q weight %d → %d\n", rw.Backend, rw.VIP, rw.Old, rw.New)
	}
	for _, c := range r.Changed {
		fmt.Fprintf(w, "  ~ %s\n", c)
	}
}

// writeConfigNotice adds to status a line when the file on disk is not
// what runs, and the last reload's errors when it failed.
func writeConfigNotice(w io.Writer, st *api.State) {
	if st.ConfigDiffers {
		fmt.Fprintf(w, "config %s on disk differs from the running configuration: `vipd reload` applies it\n", st.ConfigFile)
	}
	if st.ConfigError != "" {
		fmt.Fprintln(w, "the last reload failed (the running configuration stays):")
		for l := range strings.Lines(st.ConfigError) {
			fmt.Fprintf(w, "  %s\n", strings.TrimRight(l, "\n"))
		}
	}
}
