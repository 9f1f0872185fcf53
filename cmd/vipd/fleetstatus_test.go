package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/control/fleet"
)

func TestWriteFleetStatus(t *testing.T) {
	now := time.Date(2026, 12, 6, 6, 0, 0, 0, time.UTC)
	tables := map[string]string{"web": "aaaa"}
	box := func(name string, rev int64, ago time.Duration) fleet.BoxStatus {
		return fleet.BoxStatus{Box: name, Revision: rev, Applied: now.Add(-ago), Ready: true, Role: "active", Tables: tables}
	}
	refusing := box("box3", 6, time.Minute)
	refusing.Refused, refusing.LastError = 7, "flow_hash_seed changed: restart vipd to apply it"
	for _, tc := range []struct {
		name  string
		boxes []fleet.BoxStatus
		code  int
		want  []string
	}{
		{"agree", []fleet.BoxStatus{box("box1", 7, 2*time.Second), box("box2", 7, 3*time.Second)}, 0,
			[]string{"box1  7 ", "2s ago", "every live box applied revision 7 and builds the same tables"}},
		{"a box refuses", []fleet.BoxStatus{box("box1", 7, time.Second), refusing}, 1,
			[]string{"6 (lags)", "refused 7: flow_hash_seed changed", "not at revision 7: box3"}},
		{"none", nil, 0, []string{"no live box"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			code := writeFleetStatus(&b, tc.boxes, fleet.Agree(7, tc.boxes), now)
			if code != tc.code {
				t.Errorf("exit %d, want %d", code, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, b.String())
				}
			}
		})
	}
}
