package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

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

// valid reports whether r asks for exactly one change.
func (r *OverrideRequest) valid() bool {
	n := 0
	for _, b := range []bool{r.Weight != nil, r.ResetWeight, r.Disabled != nil} {
		if b {
			n++
		}
	}
	return n == 1 && r.VIP != "" && r.Backend != ""
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

// Overrider is a Provider that takes run-time overrides.
type Overrider interface {
	// SetOverride applies req; errors wrap ErrNotFound (no such VIP or
	// backend), ErrConflict (the file decides, not an override) or
	// ErrInvalid (a request that makes no sense).
	SetOverride(req OverrideRequest) (*OverrideAnswer, error)
}

var (
	// ErrConflict: the request cannot be done by an override (enabling a
	// backend the file disables). The handler answers 409.
	ErrConflict = errors.New("conflict")
	// ErrInvalid: the request is malformed (a weight out of range). The
	// handler answers 400.
	ErrInvalid = errors.New("invalid request")
)

// overrideReadOnly answers POST /v1/override on a read-only listener.
func overrideReadOnly(w http.ResponseWriter, _ *http.Request) {
	http.Error(w, "this listener is read-only: overrides are served on vipd's admin socket ([admin] socket) only; use `vipd weight`, `vipd disable` or `vipd enable` as root", http.StatusForbidden)
}

// handleOverride serves POST /v1/override on the admin socket.
func handleOverride(p Provider) http.Handler {
	return jsonOnly(func(w http.ResponseWriter, r *http.Request) {
		var req OverrideRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || !req.valid() {
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

// SetOverride sends req to the vipd on the admin socket at path.
func SetOverride(ctx context.Context, socket string, req OverrideRequest) (*OverrideAnswer, error) {
	var a OverrideAnswer
	return &a, postSocket(ctx, socket, "/v1/override", req, &a)
}

// overrideMark is what vipd status adds to a backend's forwarding column
// for its override: "(weight 5*)", "(disabled*)"; the star is explained
// under the table (writeOverrides).
func overrideMark(b *BackendState) string {
	o := b.Override
	if o == nil {
		return ""
	}
	var s string
	if o.Weight != nil {
		s += fmt.Sprintf("(weight %d*)", *o.Weight)
	}
	if o.Disabled {
		s += "(disabled*)"
	}
	return s
}

// writeOverrides explains the overrides marked in the table, if any.
func writeOverrides(w io.Writer, st *State) {
	var n int
	for _, v := range st.VIPs {
		for _, b := range v.Backends {
			if b.Override != nil {
				n++
			}
		}
	}
	if n == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "* %d run-time override", n)
	if n > 1 {
		b.WriteString("s")
	}
	b.WriteString(" in force over the file (Weight is the file's): undo with vipd weight -reset, vipd enable\n")
	io.WriteString(w, b.String())
}
