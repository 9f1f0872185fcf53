package main

import (
	"testing"
	"time"
)

func TestDurationsFlag(t *testing.T) {
	var d durations
	if err := d.Set("2s, 10s"); err != nil {
		t.Fatal(err)
	}
	if err := d.Set("500ms"); err != nil {
		t.Fatal(err)
	}
	if len(d) != 3 || d[0] != 2*time.Second || d[1] != 10*time.Second || d[2] != 500*time.Millisecond || d.String() != "2s,10s,500ms" {
		t.Errorf("%v", d)
	}
	for _, bad := range []string{"", "2", "0s", "-1s", "2s,x"} {
		var d durations
		if err := d.Set(bad); err == nil {
			t.Errorf("%q accepted: %v", bad, d)
		}
	}
}
