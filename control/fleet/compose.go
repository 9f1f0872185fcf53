package fleet

import (
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
	for _, key := range k.Ignored {
		c.Ignored = append(c.Ignored, fmt.Sprintf("key %q is none of the fleet's (config, overrides/, boxes/): not read", key))
	}
	for _, name := range slices.Sorted(maps.Keys(k.Overrides)) {
		o, err := ParseOverride(name, k.Overrides[name])
		if err != nil {
			c.Ignored = append(c.Ignored, err.Error()+": ignored")
			continue
		}
		b := findBackend(cfg, o)
		if b == nil {
			c.Ignored = append(c.Ignored, fmt.Sprintf("override key %q: VIP %q has no backend %s: ignored", KeyOverrides+name, o.VIP, o.Backend))
			continue
		}
		o.applyTo(b)
		c.Overrides = append(c.Overrides, o)
	}
	slices.Sort(c.Ignored)
	return c, nil
}

// findBackend returns the backend o names: its VIP by name, the backend
// by address and port (port 0 for one that keeps the client's port).
func findBackend(cfg *config.Config, o Override) *config.Backend {
	for i := range cfg.VIPs {
		v := &cfg.VIPs[i]
		if v.Name != o.VIP {
			continue
		}
		for j := range v.Backends {
			b := &v.Backends[j]
			if b.Address == o.Backend.Addr() && b.Port == o.Backend.Port() {
				return b
			}
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
