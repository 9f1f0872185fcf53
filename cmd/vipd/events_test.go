package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/testing/testkit"
)

// TestEventsCommand: vipd events prints the last N events, one a line
// with time, kind, subject, what, who and why, or as JSON lines; -f
// prints the new ones as they come.
func TestEventsCommand(t *testing.T) {
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	p := &drainProvider{events: []api.Event{
		{Seq: 1, Time: at, Kind: api.EventHealth, VIP: "web", Backend: "198.18.1.11:8080", What: "up → down: connect: connection refused"},
		{Seq: 2, Time: at, Kind: api.EventAdmin, VIP: "web", Backend: "198.18.1.12:8080", What: "POST /v1/override {...}: 200 OK", By: "uid 0 pid 42 (vipd)", Reason: "kernel update"},
		{Seq: 3, Time: at, Kind: api.EventReload, What: "applied: 1 backends added"},
	}}
	_, tcp := serveFake(t, p)
	var out, errs strings.Builder
	if code := eventsCmd([]string{"-admin", tcp, "-n", "2"}, &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("-n 2 printed %d lines:\n%s", len(lines), out.String())
	}
	for _, want := range []string{"admin", "web 198.18.1.12:8080", "POST /v1/override", "by uid 0 pid 42 (vipd)", "(kernel update)"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("%q lacks %q", lines[0], want)
		}
	}
	if !strings.Contains(lines[1], "reload") || !strings.Contains(lines[1], "applied: 1 backends added") {
		t.Errorf("second line %q", lines[1])
	}
	out.Reset()
	if code := eventsCmd([]string{"-admin", tcp, "-json", "-n", "0"}, &out, &errs); code != 0 {
		t.Fatalf("-json: exit %d", code)
	}
	var first api.Event
	if err := json.Unmarshal([]byte(strings.Split(out.String(), "\n")[0]), &first); err != nil || first.Seq != 1 || first.Kind != api.EventHealth {
		t.Errorf("-json's first line: %+v %v", first, err)
	}
	// -f: the new events, as they come.
	ctx, cancel := context.WithCancel(context.Background())
	var got []api.Event
	done := make(chan error)
	var mu = make(chan struct{}, 1)
	go func() {
		done <- printEvents(ctx, tcp, 1, true, 10*time.Millisecond, func(e api.Event) {
			mu <- struct{}{}
			got = append(got, e)
			<-mu
		}, &errs)
	}()
	count := func() int {
		mu <- struct{}{}
		defer func() { <-mu }()
		return len(got)
	}
	testkit.Eventually(t, testkit.Patience, "the last event", func() bool { return count() == 1 })
	p.mu.Lock()
	p.events = append(p.events, api.Event{Seq: 4, Time: at, Kind: api.EventDrain, What: "drained"})
	p.mu.Unlock()
	testkit.Eventually(t, testkit.Patience, "the new event", func() bool { return count() == 2 })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("following: %v", err)
	}
	if got[0].Seq != 3 || got[1].Seq != 4 || got[1].What != "drained" {
		t.Errorf("followed %+v", got)
	}
}
