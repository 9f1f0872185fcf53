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
	c.Ignored, c.Overrides = applyOverrides(cfg, k)
	return c, nil
}

// applyOverrides puts k's overrides and stray keys into cfg; it returns
// what it ignored, and why, and the overrides in force.
func applyOverrides(cfg *config.Config, k *Keys) (ignored []string, applied []Override) {
	for _, key := range k.Ignored {
		ignored = append(ignored, fmt.Sprintf("key %q is none of the fleet's (config, overrides/, boxes/): not read", key))
	}
	var byName map[string]*config.VIP
	if len(k.Overrides) > 0 {
		byName = make(map[string]*config.VIP, len(cfg.VIPs))
		for i := range cfg.VIPs {
			byName[cfg.VIPs[i].Name] = &cfg.VIPs[i]
		}
	}
	for _, name := range slices.Sorted(maps.Keys(k.Overrides)) {
		o, err := ParseOverride(name, k.Overrides[name])
		if err != nil {
			ignored = append(ignored, err.Error()+": ignored")
			continue
		}
		b := findBackend(byName[o.VIP], o)
		if b == nil {
			ignored = append(ignored, fmt.Sprintf("override key %q: VIP %q has no backend %s: ignored", KeyOverrides+name, o.VIP, o.Backend))
			continue
		}
		o.applyTo(b)
		applied = append(applied, o)
	}
	slices.Sort(ignored)
	return ignored, applied
}

// findBackend returns the backend of v (nil: none) that o names, by
// address and port (port 0 for one that keeps the client's port).
func findBackend(v *config.VIP, o Override) *config.Backend {
	if v == nil {
		return nil
	}
	for j := range v.Backends {
		b := &v.Backends[j]
		if b.Address == o.Backend.Addr() && b.Port == o.Backend.Port() {
			return b
		}
	}
	return nil
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

// Composer is Compose that keeps the last document it parsed: a
// revision that changes only overrides (vipd drain -fleet) costs a copy
// of the backends instead of parsing and checking the whole document
// again, which for 1,000 VIPs of 100 backends is most of a second. Not
// safe for concurrent use.
type Composer struct {
	local *config.Config
	doc   []byte
	base  *Composed // composed without overrides
}

// Compose is Compose(local, k), reusing the last parse when local and
// the document are the same.
func (c *Composer) Compose(local *config.Config, k *Keys) (*Composed, error) {
	if c.base == nil || c.local != local || k.ConfigErr != nil || k.Config == nil || !bytes.Equal(c.doc, k.Config) {
		base, err := Compose(local, &Keys{Revision: k.Revision, Config: k.Config, ConfigErr: k.ConfigErr})
		if err != nil {
			return nil, err
		}
		c.local, c.doc, c.base = local, k.Config, base
	}
	out := &Composed{Config: cloneBackends(c.base.Config), Warnings: c.base.Warnings}
	out.Ignored, out.Overrides = applyOverrides(out.Config, k)
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
