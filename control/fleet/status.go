package fleet

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// BoxStatus is what a box writes under boxes/BOX, under a lease: what it
// applied and whether it serves. fleet status compares them.
type BoxStatus struct {
	Box string `json:"box"`
	// Revision is the fleet revision the box applied; Applied when.
	Revision int64     `json:"revision"`
	Applied  time.Time `json:"applied"`
	// Digest is the sha256 of what the box applied (the shared
	// configuration and the overrides), hex.
	Digest string `json:"digest"`
	// Seed is the flow-hash seed the box runs with (a changed seed
	// needs a restart: a box still on the old one says so here).
	Seed uint64 `json:"seed"`
	// Tables holds, by VIP, a digest of the Maglev table the box built:
	// two boxes that build different tables from one revision send a
	// flow's packets to different backends.
	Tables map[string]string `json:"tables"`
	// Version is vipd's; Role the neighbor role; Ready whether it
	// serves.
	Version string `json:"version"`
	Role    string `json:"role"`
	Ready   bool   `json:"ready"`
	// Stale says the box has lost etcd and serves its last revision.
	Stale bool `json:"stale"`
	// Refused is the last revision the box could not apply (0: none),
	// and LastError why.
	Refused   int64  `json:"refused,omitempty"`
	LastError string `json:"last_error,omitempty"`
	// Divergent says the box also has per-box overrides (vipd drain
	// without -fleet), which its tables include.
	Divergent bool `json:"divergent,omitempty"`
}

// Encode returns s as the box key's value.
func (s *BoxStatus) Encode() ([]byte, error) { return json.Marshal(s) }

// DecodeBoxStatus parses a box key's value.
func DecodeBoxStatus(b []byte) (BoxStatus, error) {
	var s BoxStatus
	err := json.Unmarshal(b, &s)
	return s, err
}

// Agreement is what fleet status concludes from the live boxes' keys.
type Agreement struct {
	// Latest is the latest revision that changed the fleet's
	// configuration (config or overrides/): the one every box should
	// have applied.
	Latest int64
	// Lagging lists the live boxes that have not applied Latest, sorted.
	Lagging []string
	// Disagree holds, by VIP, the boxes by the table digest they built,
	// for each VIP whose boxes built more than one table.
	Disagree map[string]map[string][]string
}

// OK reports whether every live box has applied the latest revision and
// every VIP has one table on all of them: fleet status's exit status 0.
func (a *Agreement) OK() bool { return len(a.Lagging) == 0 && len(a.Disagree) == 0 }

// Agree compares the live boxes' status with latest, the revision of the
// last configuration change. A box that applied a revision older than
// latest lags (a box refusing latest lags too, and says why), unless it
// runs the same keys (digest) as a box at latest or later: revisions
// also move with changes to other keys (the boxes' own), so a box that
// read the keys earlier has an older revision of the same configuration.
// A VIP whose boxes report different table digests disagrees, whatever
// their revisions, since that breaks flows moved between them now.
func Agree(latest int64, boxes []BoxStatus) *Agreement {
	a := &Agreement{Latest: latest}
	current := map[string]bool{} // digests applied at latest or later
	for _, b := range boxes {
		if b.Revision >= latest && b.Digest != "" {
			current[b.Digest] = true
		}
	}
	tables := map[string]map[string][]string{}
	for _, b := range boxes {
		if b.Revision < latest && !current[b.Digest] {
			a.Lagging = append(a.Lagging, b.Box)
		}
		for vip, d := range b.Tables {
			if tables[vip] == nil {
				tables[vip] = map[string][]string{}
			}
			tables[vip][d] = append(tables[vip][d], b.Box)
		}
	}
	slices.Sort(a.Lagging)
	for vip, by := range tables {
		if len(by) > 1 {
			for _, bs := range by {
				slices.Sort(bs)
			}
			if a.Disagree == nil {
				a.Disagree = map[string]map[string][]string{}
			}
			a.Disagree[vip] = by
		}
	}
	return a
}

// Summary says what is wrong in a line per problem, sorted; nothing when
// OK.
func (a *Agreement) Summary() []string {
	var out []string
	if len(a.Lagging) > 0 {
		out = append(out, fmt.Sprintf("not at revision %d: %s", a.Latest, strings.Join(a.Lagging, ", ")))
	}
	for _, vip := range slices.Sorted(maps.Keys(a.Disagree)) {
		var parts []string
		for _, d := range slices.Sorted(maps.Keys(a.Disagree[vip])) {
			parts = append(parts, fmt.Sprintf("%s on %s", shortDigest(d), strings.Join(a.Disagree[vip][d], ", ")))
		}
		out = append(out, fmt.Sprintf("VIP %s: different tables: %s", vip, strings.Join(parts, "; ")))
	}
	return out
}

// shortDigest is a digest's first 12 hex digits, as status prints it.
func shortDigest(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}
