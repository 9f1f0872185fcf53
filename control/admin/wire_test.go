package admin

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/vipd/vipd/conntrack"
)

// TestWireConntrack: /v1/state carried conntrack.Stats itself before the
// wire types had a package of their own; api.ConntrackStats must encode
// as it did.
func TestWireConntrack(t *testing.T) {
	var st conntrack.Stats
	v := reflect.ValueOf(&st).Elem()
	for i := range v.NumField() {
		v.Field(i).SetUint(uint64(i + 1))
	}
	want, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(WireConntrack(st))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("api.ConntrackStats encodes as\n%s\nconntrack.Stats as\n%s", got, want)
	}
}
