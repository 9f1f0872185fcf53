package fleet

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/vipd/vipd/control/config"
)

// ErrNoConfig is Compose's error when the fleet has no config key.
var ErrNoConfig = errors.New("the fleet has no config key (write one with vipd fleet push FILE)")

// Composed is a box's whole configuration as of one revision of the
// fleet's keys.
type Composed struct {
	// Config is the local file's settings with the shared seed and VIPs,
	// the overrides applied to the backends' states and weights, as
	// though the document said them.
	Config *config.Config
	// Warnings are the document's warnings (as -check gives them).
	Warnings []config.Problem
	// Overrides are the overrides in force, by VIP name and backend.
	Overrides []Override
	// Ignored says, for each override or key the box did not apply,
	// why; sorted. Each is a problem of the fleet's keys, not of this
	// box: every box reports the same.
	Ignored []string
}

// Compose joins a box's local file (with [fleet]) and the fleet's keys
// as of one revision into the configuration the box runs. The shared
// document is checked as a file is (config.WithShared); an error refuses
// the whole revision. An override that does not parse or names no
// backend of the document is ignored and listed, never an error: a
// mistyped override must not stop every box from following the fleet.
func Compose(local *config.Config, k *Keys) (*Composed, error) {
	if local.Fleet == nil {
		return nil, errors.New("fleet: Compose needs a configuration with [fleet]")
	}
	if k.ConfigErr != nil {
		return nil, k.ConfigErr
	}
	if k.Config == nil {
		return nil, ErrNoConfig
	}
	name := fmt.Sprintf("etcd %s@%d", local.Fleet.Key(KeyConfig), k.Revision)
	cfg, warns, err := config.WithShared(local, name, k.Config)
	if err != nil {
		return nil, err
	}
	c := &Composed{Config: cfg, Warnings: warns}
	c.Ignored, c.Overrides = applyOverrides(cfg, k, nil)
	return c, nil
}

// applyOverrides puts k's overrides and stray keys into cfg; it returns
// what it ignored, and why, and the overrides in force. When orig is
// not nil, it records there each changed backend's state and weight as
// they were.
func applyOverrides(cfg *config.Config, k *Keys, orig map[backendAt]backendValues) (ignored []string, applied []Override) {
	for _, key := range k.Ignored {
		ignored = append(ignored, fmt.Sprintf("key %q is none of the fleet's (config, overrides/, boxes/): not read", key))
	}
	var byName map[string]int
	if len(k.Overrides) > 0 {
		byName = make(map[string]int, len(cfg.VIPs))
		for i := range cfg.VIPs {
			byName[cfg.VIPs[i].Name] = i
		}
	}
	for _, name := range slices.Sorted(maps.Keys(k.Overrides)) {
		o, err := ParseOverride(name, k.Overrides[name])
		if err != nil {
			ignored = append(ignored, err.Error()+": ignored")
			continue
		}
		vi, ok := byName[o.VIP]
		bi := -1
		if ok {
			bi = findBackend(&cfg.VIPs[vi], o)
		}
		if bi < 0 {
			ignored = append(ignored, fmt.Sprintf("override key %q: VIP %q has no backend %s: ignored", KeyOverrides+name, o.VIP, o.Backend))
			continue
		}
		b := &cfg.VIPs[vi].Backends[bi]
		if at := (backendAt{vi, bi}); orig != nil {
			if _, seen := orig[at]; !seen {
				orig[at] = backendValues{b.State, b.Weight}
			}
		}
		o.applyTo(b)
		applied = append(applied, o)
	}
	slices.Sort(ignored)
	return ignored, applied
}

// findBackend returns the index of the backend of v that o names (-1:
// none), by address and port (port 0 for one that keeps the client's
// port).
func findBackend(v *config.VIP, o Override) int {
	for j := range v.Backends {
		b := &v.Backends[j]
		if b.Address == o.Backend.Addr() && b.Port == o.Backend.Port() {
			return j
		}
	}
	return -1
}

// applyTo puts o into b as the document would say it: a drain (or weight
// 0) takes no new flows and keeps the flows there are; disabled takes the
// backend out, which a drain does not undo.
func (o Override) applyTo(b *config.Backend) {
	switch {
	case o.Disabled:
		b.State = config.StateDisabled
	case o.Drain, o.Weight != nil && *o.Weight == 0:
		if b.State != config.StateDisabled {
			b.State = config.StateDraining
		}
	case o.Weight != nil:
		b.Weight = *o.Weight
	}
}

// What says what o does, for status: "drain", "disabled", "weight 5".
func (o Override) What() string {
	switch {
	case o.Disabled:
		return "disabled"
	case o.Drain:
		return "drain"
	case o.Weight != nil:
		return fmt.Sprintf("weight %d", *o.Weight)
	}
	return "none"
}

// Composer is Compose that keeps the last configuration it composed: a
// revision that changes only overrides (vipd drain -fleet) costs a copy
// of the backends instead of parsing and checking the whole document
// again, which for 1,000 VIPs of 100 backends is most of a second. It
// keeps no copy of its own: the last configuration is the one the box
// runs (or tried to), which is never changed once composed, and the
// document's values of the backends its overrides changed. Not safe for
// concurrent use.
type Composer struct {
	local *config.Config
	doc   []byte
	last  *Composed
	// orig holds, for each backend last's overrides changed, its state
	// and weight as the document says them.
	orig map[backendAt]backendValues
}

// backendAt is a backend's place in a configuration: VIP, backend.
type backendAt struct{ vip, backend int }

// backendValues are what an override changes in a backend.
type backendValues struct {
	state  config.BackendState
	weight uint32
}

// Compose is Compose(local, k), reusing the last parse when local and
// the document are the same.
func (c *Composer) Compose(local *config.Config, k *Keys) (*Composed, error) {
	var cfg *config.Config
	var warns []config.Problem
	if c.last != nil && c.local == local && k.ConfigErr == nil && k.Config != nil && bytes.Equal(c.doc, k.Config) {
		cfg, warns = cloneBackends(c.last.Config), c.last.Warnings
		for at, v := range c.orig {
			b := &cfg.VIPs[at.vip].Backends[at.backend]
			b.State, b.Weight = v.state, v.weight
		}
	} else {
		base, err := Compose(local, &Keys{Revision: k.Revision, Config: k.Config, ConfigErr: k.ConfigErr})
		if err != nil {
			return nil, err
		}
		cfg, warns = base.Config, base.Warnings
	}
	orig := map[backendAt]backendValues{}
	out := &Composed{Config: cfg, Warnings: warns}
	out.Ignored, out.Overrides = applyOverrides(cfg, k, orig)
	c.local, c.doc, c.last, c.orig = local, k.Config, out, orig
	return out, nil
}

// cloneBackends copies cfg deep enough for overrides to change its
// backends' states and weights: the VIPs and their backends; the rest
// is shared, and never changed once composed.
func cloneBackends(cfg *config.Config) *config.Config {
	c := *cfg
	c.VIPs = slices.Clone(cfg.VIPs)
	for i := range c.VIPs {
		c.VIPs[i].Backends = slices.Clone(c.VIPs[i].Backends)
	}
	return &c
}
