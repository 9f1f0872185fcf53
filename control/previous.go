package control

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"time"

	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/dataplane"
)

// Previous remembers, for every VIP with previous_owner, the Maglev
// members of its configured backend set and of the set before the last
// change (dataplane.VIPSpec.Previous). The configured set is what the
// operator asked for — active backends at their full configured weights,
// in file order — not what health makes of it: a health change is not a
// change of the set, and a backend's slow start is not one of its weight.
// VIPs are known by their key (address, port, protocol), which survives a
// rename.
//
// Previous is not safe for concurrent use; the daemon holds it under its
// lock. Marshal and UnmarshalPrevious carry it across restarts (the
// daemon's state file), so that a box restarted after a change, or
// started with a changed file, keeps the same previous sets as boxes that
// saw the change live.
type Previous struct {
	vips map[string]*previousVIP
}

type previousVIP struct {
	Current  []PreviousMember `json:"current"`
	Previous []PreviousMember `json:"previous,omitempty"`
	Since    time.Time        `json:"since,omitzero"` // when Previous was replaced
}

// PreviousMember is a member of a Maglev table, as JSON.
type PreviousMember struct {
	Addr   netip.Addr `json:"addr"`
	Port   uint16     `json:"port,omitempty"`
	Weight uint32     `json:"weight"`
}

// NewPrevious returns an empty Previous.
func NewPrevious() *Previous { return &Previous{vips: map[string]*previousVIP{}} }

// previousFile is the state file's layout.
type previousFile struct {
	Version int                     `json:"version"`
	VIPs    map[string]*previousVIP `json:"previous_owner"`
}

// Marshal returns p as JSON, for the state file.
func (p *Previous) Marshal() ([]byte, error) {
	return json.MarshalIndent(previousFile{Version: 1, VIPs: p.vips}, "", "  ")
}

// UnmarshalPrevious reads what Marshal wrote.
func UnmarshalPrevious(b []byte) (*Previous, error) {
	var f previousFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, err
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("state version %d, this vipd reads 1", f.Version)
	}
	p := NewPrevious()
	for k, v := range f.VIPs {
		if v != nil {
			p.vips[k] = v
		}
	}
	return p, nil
}

// ConfiguredMembers returns the Maglev members of v's configured set: its
// active backends at full weight, in file order (as Plan.VIP would give
// them with every backend healthy).
func ConfiguredMembers(v *config.VIP) []PreviousMember {
	var ms []PreviousMember
	for j := range v.Backends {
		b := &v.Backends[j]
		if b.State != config.StateActive || b.Weight == 0 {
			continue
		}
		m := PreviousMember{Addr: b.Address, Port: b.Port, Weight: weight(b.Weight, 0)}
		if v.Mode == config.ModeDSR {
			m.Port = 0
		}
		ms = append(ms, m)
	}
	return ms
}

// Change is a VIP whose configured set Observe found changed.
type Change struct {
	VIP   string // its name
	Until time.Time
}

// Observe takes cfg's configured sets as of now: a previous_owner VIP
// whose set differs from the one last observed keeps that one as its
// previous set from now on; VIPs that are gone or no longer use
// previous_owner are forgotten. It returns the VIPs whose set changed and
// whether p changed at all (to be saved).
func (p *Previous) Observe(cfg *config.Config, now time.Time) (changes []Change, dirty bool) {
	seen := make(map[string]bool, len(cfg.VIPs))
	for i := range cfg.VIPs {
		v := &cfg.VIPs[i]
		if !v.HintsPreviousOwner() {
			continue
		}
		k := v.Key()
		seen[k] = true
		cur := ConfiguredMembers(v)
		e := p.vips[k]
		switch {
		case e == nil:
			p.vips[k] = &previousVIP{Current: cur}
			dirty = true
		case !slices.Equal(e.Current, cur):
			e.Previous, e.Current, e.Since = e.Current, cur, now
			dirty = true
			changes = append(changes, Change{VIP: v.Name, Until: now.Add(v.PreviousOwnerTTL.D())})
		}
	}
	for k := range p.vips {
		if !seen[k] {
			delete(p.vips, k)
			dirty = true
		}
	}
	return changes, dirty
}

// For returns v's previous set for the dataplane, nil when it has none or
// it expired (previous_owner_ttl after the change), and when it expires.
func (p *Previous) For(v *config.VIP, now time.Time) ([]dataplane.PreviousBackend, time.Time) {
	e, until := p.live(v, now)
	if e == nil {
		return nil, time.Time{}
	}
	out := make([]dataplane.PreviousBackend, len(e.Previous))
	for i, m := range e.Previous {
		out[i] = dataplane.PreviousBackend{Addr: m.Addr, Port: m.Port, Weight: m.Weight}
	}
	return out, until
}

// Until returns when v's previous set expires, zero if it has none (For
// without the set).
func (p *Previous) Until(v *config.VIP, now time.Time) time.Time {
	_, until := p.live(v, now)
	return until
}

// live returns v's entry and when its previous set expires, if it has one
// in effect at now.
func (p *Previous) live(v *config.VIP, now time.Time) (*previousVIP, time.Time) {
	if !v.HintsPreviousOwner() {
		return nil, time.Time{}
	}
	e := p.vips[v.Key()]
	if e == nil || len(e.Previous) == 0 {
		return nil, time.Time{}
	}
	until := e.Since.Add(v.PreviousOwnerTTL.D())
	if !now.Before(until) {
		return nil, time.Time{}
	}
	return e, until
}

// Keys lists the VIP keys p holds, sorted (for tests and logs).
func (p *Previous) Keys() []string {
	ks := make([]string, 0, len(p.vips))
	for k := range p.vips {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Clone returns a copy of p that Observe may change without touching p.
func (p *Previous) Clone() *Previous {
	c := &Previous{vips: make(map[string]*previousVIP, len(p.vips))}
	for k, v := range p.vips {
		e := *v
		c.vips[k] = &e // Observe replaces the slices, never writes into them
	}
	return c
}
