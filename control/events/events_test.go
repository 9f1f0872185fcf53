package events

import (
	"testing"
	"time"

	"github.com/vipd/vipd/control/admin/api"
)

// TestLog: events come back in order after a sequence number, the newest
// max of them when asked for fewer; a full ring drops the oldest and says
// how many a reader missed.
func TestLog(t *testing.T) {
	l := New(4)
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	l.now = func() time.Time { return at }
	if evs, missed := l.Since(0, 0); len(evs) != 0 || missed != 0 || l.Last() != 0 {
		t.Fatalf("empty log: %v %d", evs, missed)
	}
	for i := range 3 {
		if seq := l.Add(api.Event{Kind: api.EventHealth, What: string(rune('a' + i))}); seq != uint64(i+1) {
			t.Fatalf("seq %d, want %d", seq, i+1)
		}
	}
	evs, missed := l.Since(1, 0)
	if len(evs) != 2 || evs[0].What != "b" || evs[1].What != "c" || evs[0].Seq != 2 || missed != 0 || !evs[0].Time.Equal(at) {
		t.Errorf("since 1: %+v missed %d", evs, missed)
	}
	if evs, _ := l.Since(0, 1); len(evs) != 1 || evs[0].What != "c" {
		t.Errorf("the newest one: %+v", evs)
	}
	for i := 3; i < 7; i++ {
		l.Add(api.Event{What: string(rune('a' + i))})
	}
	// Seven added, four kept (d..g): a reader at 1 missed b and c.
	evs, missed = l.Since(1, 0)
	if len(evs) != 4 || evs[0].What != "d" || evs[3].What != "g" || missed != 2 || l.Last() != 7 {
		t.Errorf("after wrapping: %+v missed %d last %d", evs, missed, l.Last())
	}
	if evs, missed := l.Since(7, 0); len(evs) != 0 || missed != 0 {
		t.Errorf("nothing new: %+v %d", evs, missed)
	}
	given := at.Add(-time.Hour)
	l.Add(api.Event{Time: given})
	if evs, _ := l.Since(7, 0); !evs[0].Time.Equal(given) {
		t.Errorf("a given time was replaced: %v", evs[0].Time)
	}
}
