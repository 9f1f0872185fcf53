package fleet

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// The keys a box reads and writes below the fleet's prefix; nothing else
// under it is read (docs/fleet.md, "The keys").
const (
	// KeyConfig holds the shared configuration: flow_hash_seed and every
	// [[vip]], as TOML.
	KeyConfig = "config"
	// KeyOverrides prefixes the run-time overrides: overrides/VIP/BACKEND.
	KeyOverrides = "overrides/"
	// KeyBoxes prefixes each box's status: boxes/BOX, under a lease.
	KeyBoxes = "boxes/"
)

// Event is one change to a key below the prefix, as a watch delivers it:
// Key without the prefix; Value empty for a deletion.
type Event struct {
	Key      string
	Value    []byte
	Delete   bool
	Revision int64 // the revision of the transaction that made it
}

// Keys are the fleet's keys as of one revision: what a box applies as one
// snapshot.
type Keys struct {
	// Revision is the revision they are as of.
	Revision int64
	// Config is the config key's document, uncompressed (nil: no such
	// key, or ConfigErr).
	Config []byte
	// ConfigErr is why the config key's value is no document (a
	// compressed value that does not decompress).
	ConfigErr error
	// Overrides are the override keys' values by the key below
	// "overrides/".
	Overrides map[string][]byte
	// Ignored lists the keys below the prefix that are none of the
	// fleet's (sorted): a box reports them and reads nothing from them.
	Ignored []string
}

// Clone returns a copy of k that shares no map or slice with it.
func (k *Keys) Clone() *Keys {
	c := *k
	c.Config = bytes.Clone(k.Config)
	c.Overrides = maps.Clone(k.Overrides)
	c.Ignored = slices.Clone(k.Ignored)
	return &c
}

// apply makes one event's change.
func (k *Keys) apply(e Event) {
	switch {
	case e.Key == KeyConfig:
		k.Config, k.ConfigErr = nil, nil
		if !e.Delete {
			k.Config, k.ConfigErr = DecodeConfig(e.Value)
		}
	case strings.HasPrefix(e.Key, KeyOverrides):
		name := strings.TrimPrefix(e.Key, KeyOverrides)
		if e.Delete {
			delete(k.Overrides, name)
			return
		}
		if k.Overrides == nil {
			k.Overrides = map[string][]byte{}
		}
		k.Overrides[name] = bytes.Clone(e.Value)
	case strings.HasPrefix(e.Key, KeyBoxes):
		// The boxes' own status: not configuration.
	default:
		i, found := slices.BinarySearch(k.Ignored, e.Key)
		switch {
		case e.Delete && found:
			k.Ignored = slices.Delete(k.Ignored, i, i+1)
		case !e.Delete && !found:
			k.Ignored = slices.Insert(k.Ignored, i, e.Key)
		}
	}
}

// Advance applies events, in the order etcd delivered them, and returns
// the keys as of each revision that changed configuration (config or
// overrides), in order: one snapshot per revision, so that a box never
// applies part of a transaction. Events of revisions at or below
// k.Revision (a watch resumed from an older revision) are skipped. k
// ends as of the last event's revision.
func (k *Keys) Advance(events []Event) []*Keys {
	var out []*Keys
	changed := false
	var started int64 // the revision this call began applying
	for _, e := range events {
		if e.Revision < k.Revision || e.Revision == k.Revision && e.Revision != started {
			continue // k already holds it
		}
		if e.Revision > k.Revision {
			if changed {
				out = append(out, k.Clone())
			}
			k.Revision, started, changed = e.Revision, e.Revision, false
		}
		k.apply(e)
		if !strings.HasPrefix(e.Key, KeyBoxes) {
			changed = true
		}
	}
	if changed {
		out = append(out, k.Clone())
	}
	return out
}

// Override is one run-time override from the fleet: the key
// overrides/VIP/BACKEND, and its value, JSON with exactly one of "drain"
// (true), "weight" (0 to 1000; 0 drains) and "disabled" (true), and who
// set it, why and when.
type Override struct {
	VIP      string
	Backend  netip.AddrPort
	Drain    bool
	Weight   *uint32
	Disabled bool
	By       string
	Why      string
	At       time.Time
}

// overrideValue is an override key's value as stored.
type overrideValue struct {
	Drain    *bool     `json:"drain,omitempty"`
	Weight   *uint32   `json:"weight,omitempty"`
	Disabled *bool     `json:"disabled,omitempty"`
	By       string    `json:"by,omitempty"`
	Why      string    `json:"why,omitempty"`
	At       time.Time `json:"at,omitzero"`
}

// maxOverrideWeight is the largest weight an override may set, as
// [[vip.backend]] weight.
const maxOverrideWeight = 1000

// ParseOverride parses an override key (below "overrides/") and value;
// the error says what is wrong with which key, for the box's status.
func ParseOverride(name string, value []byte) (Override, error) {
	vip, backend, ok := strings.Cut(name, "/")
	if !ok || vip == "" || backend == "" {
		return Override{}, fmt.Errorf("override key %q: want overrides/VIP/BACKEND", KeyOverrides+name)
	}
	ap, err := netip.ParseAddrPort(backend)
	if err != nil {
		return Override{}, fmt.Errorf("override key %q: backend %q is not ADDR:PORT ([v6]:PORT for IPv6): %v", KeyOverrides+name, backend, err)
	}
	var v overrideValue
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return Override{}, fmt.Errorf("override key %q: %v", KeyOverrides+name, err)
	}
	n := 0
	for _, set := range []bool{v.Drain != nil, v.Weight != nil, v.Disabled != nil} {
		if set {
			n++
		}
	}
	o := Override{VIP: vip, Backend: ap, Weight: v.Weight, By: v.By, Why: v.Why, At: v.At}
	switch {
	case n != 1:
		return Override{}, fmt.Errorf("override key %q: want exactly one of \"drain\": true, \"weight\": N, \"disabled\": true; it has %d", KeyOverrides+name, n)
	case v.Drain != nil && !*v.Drain, v.Disabled != nil && !*v.Disabled:
		return Override{}, fmt.Errorf("override key %q: \"drain\" and \"disabled\" can only be true (delete the key to undo)", KeyOverrides+name)
	case v.Weight != nil && *v.Weight > maxOverrideWeight:
		return Override{}, fmt.Errorf("override key %q: weight %d is over %d", KeyOverrides+name, *v.Weight, maxOverrideWeight)
	}
	o.Drain = v.Drain != nil
	o.Disabled = v.Disabled != nil
	return o, nil
}

// Digest is the sha256 (hex) of what k configures: the shared document
// and every override, in key order. Boxes that applied equal keys report
// equal digests in their status.
func (k *Keys) Digest() string {
	h := sha256.New()
	var n [8]byte
	field := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field(k.Config)
	for _, name := range slices.Sorted(maps.Keys(k.Overrides)) {
		field([]byte(name))
		field(k.Overrides[name])
	}
	return hex.EncodeToString(h.Sum(nil))
}
