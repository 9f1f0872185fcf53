package daemon

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/config"
)

// ReloadReport is what one reload did: the changes it applied, or every
// reason it refused the file.
type ReloadReport struct {
	File string
	// Diff is what the reload changed; nil when it was refused.
	Diff *config.Diff
	// Errors are the reasons of a refusal, one entry each (a problem of
	// the file with its file:line, a key that needs a restart).
	Errors []string
	// Warnings are the new file's warnings.
	Warnings []config.Problem
}

// ReloadWithReport is Reload, returning what the reload changed or why it
// was refused. The error is non-nil for a refusal (as Reload's) and for
// a reload that could not be tried (ErrNotRunning: then the report is
// nil).
func (d *Daemon) ReloadWithReport() (*ReloadReport, error) {
	return d.reload()
}

// ReloadConfig implements admin.Reloader.
func (d *Daemon) ReloadConfig() (*api.ReloadResult, error) {
	rep, err := d.reload()
	if rep == nil {
		return nil, err
	}
	res := &api.ReloadResult{OK: err == nil, File: rep.File, Errors: rep.Errors}
	for _, w := range rep.Warnings {
		res.Warnings = append(res.Warnings, w.String())
	}
	if df := rep.Diff; df != nil {
		AddDiff(res, df)
	}
	return res, nil
}

// AddDiff puts what df says changed into res, as a reload answers it:
// for the reload's answer, and for vipd fleet push, which prints the
// change it makes to the fleet as vipd reload prints a reload's.
func AddDiff(res *api.ReloadResult, df *config.Diff) {
	res.VIPsAdded, res.VIPsRemoved = df.VIPsAdded, df.VIPsRemoved
	for _, b := range df.BackendsAdded {
		res.BackendsAdded = append(res.BackendsAdded, api.BackendRef{VIP: b.VIP, Backend: b.Backend})
	}
	for _, b := range df.BackendsRemoved {
		res.BackendsRemoved = append(res.BackendsRemoved, api.BackendRef{VIP: b.VIP, Backend: b.Backend})
	}
	for _, r := range df.Reweighted {
		res.Reweighted = append(res.Reweighted, api.Reweight{BackendRef: api.BackendRef{VIP: r.VIP, Backend: r.Backend}, Old: r.Old, New: r.New})
	}
	for _, c := range df.Keys {
		res.Changed = append(res.Changed, c.String())
	}
}

// refuse ends a refused reload: it counts it, logs each of errs as an
// entry of its own (a file with five errors is five log entries, not
// one with newlines in it), keeps them for /v1/state, and returns err.
func (d *Daemon) refuse(rep *ReloadReport, errs []string, err error) (*ReloadReport, error) {
	d.reloadErr.Add(1)
	rep.Errors = errs
	for i, e := range errs {
		d.log.Error("reload refused: the running configuration stays", "err", e, "error", i+1, "of", len(errs))
	}
	d.cfgFile.failed(errs)
	d.event(api.Event{Kind: api.EventReload, What: "refused: " + strings.Join(errs, "; ")})
	return rep, err
}

// errorEntries splits a load error into one entry per problem.
func errorEntries(err error) []string {
	var ce *config.Errors
	if errors.As(err, &ce) {
		out := make([]string, len(ce.Problems))
		for i, p := range ce.Problems {
			out[i] = p.String()
		}
		return out
	}
	return []string{err.Error()}
}

// configFile is what the daemon knows of its configuration file: a hash
// of the bytes it last loaded, to tell whether the file on disk is still
// those, and the errors of the last reload while it failed. Its lock is
// taken under d.mu or alone, never the other way round.
type configFile struct {
	path string
	mu   sync.Mutex
	// +checklocks:mu
	loaded [sha256.Size]byte
	// +checklocks:mu
	known bool // loaded holds the hash of a file that loaded
	// The file as last hashed, by modification time and size: the hash
	// is read again only when these change.
	// +checklocks:mu
	seenMod time.Time
	// +checklocks:mu
	seenSize int64
	// +checklocks:mu
	seenDiffers bool
	// +checklocks:mu
	lastErr []string
	// lastOK: the last load (the start, or the last reload) applied;
	// okAt is when the configuration last loaded.
	// +checklocks:mu
	lastOK bool
	// +checklocks:mu
	okAt time.Time
}

// newConfigFile hashes the file at path as the configuration New was
// given. The file is read again here, after the caller loaded it: an
// edit in between is taken as what runs.
func newConfigFile(path string) *configFile {
	f := &configFile{path: path, lastOK: true, okAt: time.Now()}
	if path == "" {
		return f
	}
	if data, err := os.ReadFile(path); err == nil {
		f.mu.Lock()
		f.loaded, f.known = sha256.Sum256(data), true
		f.mu.Unlock()
	}
	return f
}

// succeeded records data as the file that runs and clears the last error.
func (f *configFile) succeeded(data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loaded, f.known = sha256.Sum256(data), true
	f.seenMod, f.seenSize = time.Time{}, 0
	f.lastErr = nil
	f.lastOK, f.okAt = true, time.Now()
}

func (f *configFile) failed(errs []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastErr = errs
	f.lastOK = false
}

// lastLoad reports whether the last load applied, and when the
// configuration last loaded.
func (f *configFile) lastLoad() (ok bool, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastOK, f.okAt
}

// status reports whether the file on disk differs from the one that
// runs (a file gone or unreadable differs), and the last reload's errors.
// It reads the file only when its time or size changed since the last
// call.
func (f *configFile) status() (differs bool, lastErr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	lastErr = strings.Join(f.lastErr, "\n")
	if !f.known {
		return false, lastErr
	}
	fi, err := os.Stat(f.path)
	if err != nil {
		return true, lastErr
	}
	if !f.seenMod.IsZero() && fi.ModTime().Equal(f.seenMod) && fi.Size() == f.seenSize {
		return f.seenDiffers, lastErr
	}
	data, err := os.ReadFile(f.path)
	if err != nil {
		return true, lastErr
	}
	f.seenMod, f.seenSize = fi.ModTime(), fi.Size()
	f.seenDiffers = sha256.Sum256(data) != f.loaded
	return f.seenDiffers, lastErr
}

// restartEntries are the changes of diff a reload cannot apply, one entry
// each (without ": needs a restart"): keys of [dataplane] (but egress_mtu), [conntrack], [admin] and
// [bgp]. Should the diff miss a difference, the table is still named.
func restartEntries(old, new *config.Config, diff *config.Diff) []string {
	var out []string
	named := map[string]bool{}
	for _, c := range diff.Keys {
		switch {
		case c.Table == "dataplane" && (c.Key == "egress_mtu" || c.Key == "neighbor_role"):
			continue
		case c.Table == "dataplane", c.Table == "conntrack", c.Table == "admin", c.Table == "bgp", c.Table == "fleet":
			named[c.Table] = true
			out = append(out, c.String())
		}
	}
	for _, t := range restartOnly(old, new) {
		if !named[t] {
			out = append(out, fmt.Sprintf("[%s] changed", t))
		}
	}
	return out
}

// logChanges logs what a reload changed, in one entry.
func (d *Daemon) logChanges(df *config.Diff) {
	if df.Empty() {
		d.log.Info("reload: the file is unchanged")
		d.event(api.Event{Kind: api.EventReload, What: "applied: the file is unchanged"})
		return
	}
	keys := make([]string, len(df.Keys))
	for i, c := range df.Keys {
		keys[i] = c.String()
	}
	d.log.Info("reload changes", "vips_added", df.VIPsAdded, "vips_removed", df.VIPsRemoved,
		"backends_added", len(df.BackendsAdded), "backends_removed", len(df.BackendsRemoved),
		"reweighted", len(df.Reweighted), "keys", keys)
	d.event(api.Event{Kind: api.EventReload, What: reloadWhat(df, keys)})
}

// reloadWhat is a reload's diff in a line, for its event: the VIPs and
// backends added and removed, the reweighted, and every changed key.
func reloadWhat(df *config.Diff, keys []string) string {
	var parts []string
	if len(df.VIPsAdded) > 0 {
		parts = append(parts, "VIPs added "+strings.Join(df.VIPsAdded, ", "))
	}
	if len(df.VIPsRemoved) > 0 {
		parts = append(parts, "VIPs removed "+strings.Join(df.VIPsRemoved, ", "))
	}
	for _, n := range []struct {
		what string
		n    int
	}{{"backends added", len(df.BackendsAdded)}, {"backends removed", len(df.BackendsRemoved)}, {"reweighted", len(df.Reweighted)}} {
		if n.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n.n, n.what))
		}
	}
	parts = append(parts, keys...)
	return "applied: " + strings.Join(parts, "; ")
}
