package main

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestReportSmall runs the whole report on a few thousand flows so that it
// cannot rot, and checks the properties the report exists to show.
func TestReportSmall(t *testing.T) {
	cfg := config{flows: 5000, m: 1021, seed: 1, hashSeed: 7, vnodes: 40}
	rows, err := measure(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 5 || rows[0].name != "ideal" {
		t.Fatalf("got %d rows starting with %q, want ideal + 4 algorithms", len(rows), rows[0].name)
	}
	for _, r := range rows[1:] {
		consistent := !strings.HasPrefix(r.name, "mod-N")
		switch {
		case consistent && (r.added > 0.2 || r.removed > 0.05):
			t.Errorf("%s: moved %.1f%% on add and %.1f%% on remove; consistent hashing should move about 9%% and 1%%", r.name, 100*r.added, 100*r.removed)
		case !consistent && r.added < 0.5:
			t.Errorf("%s: moved only %.1f%% on add; mod-N should move about 91%%", r.name, 100*r.added)
		}
		if r.load10 < 1 || r.load100 < 1 || r.build <= 0 || r.lookupNs <= 0 {
			t.Errorf("%s: implausible row %+v", r.name, r)
		}
	}

	// Same inputs, same numbers: only the timings may differ.
	again, err := measure(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		a, b := rows[i], again[i]
		if a.added != b.added || a.removed != b.removed || a.load10 != b.load10 || a.load100 != b.load100 {
			t.Errorf("%s: not deterministic: %+v then %+v", a.name, a, b)
		}
	}

	var out bytes.Buffer
	render(&out, cfg, rows)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	table := lines[2:] // parameters, blank line, then the table
	if len(table) != 2+len(rows) {
		t.Fatalf("rendered %d table lines, want %d:\n%s", len(table), 2+len(rows), out.String())
	}
	for _, l := range table {
		if !strings.HasPrefix(l, "|") || utf8.RuneCountInString(l) != utf8.RuneCountInString(table[0]) {
			t.Errorf("line not aligned with the header:\n%s\n%s", table[0], l)
		}
	}
	t.Logf("\n%s", out.String())
}
