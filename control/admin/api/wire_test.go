package api

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"reflect"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/wire.golden from the current types")

// wireTypes are the bodies that go over the admin API as JSON.
var wireTypes = []any{
	State{}, WhereAnswer{}, Conns{}, DrainRequest{}, OverrideRequest{},
	OverrideAnswer{}, ReloadResult{}, RoleRequest{}, RoleAnswer{},
	BoxDrainRequest{}, BoxDrainAnswer{}, EventsAnswer{},
}

// fill sets every field v reaches to a value of its own (a counter, so
// that the golden file shows which field is which): one element in each
// slice and map, pointers allocated.
func fill(v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", *n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*n))
	case reflect.Float64:
		v.SetFloat(float64(*n) + 0.5)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), n)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), n)
	case reflect.Map:
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, n)
		fill(e, n)
		v.Set(reflect.MakeMap(v.Type()))
		v.SetMapIndex(k, e)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(*n) * time.Second)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), n)
			}
		}
	default:
		panic(fmt.Sprintf("fill: %s", v.Type()))
	}
}

// TestWireGolden pins the JSON of every body of the admin API, encoded as
// the server encodes /v1/state, both with every field set and empty (the
// fields omitted when empty): a field renamed, retagged or retyped shows
// as a diff of testdata/wire.golden. go test -run TestWireGolden -update
// rewrites it.
func TestWireGolden(t *testing.T) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	for _, w := range wireTypes {
		typ := reflect.TypeOf(w)
		full := reflect.New(typ).Elem()
		n := 0
		fill(full, &n)
		fmt.Fprintf(&buf, "// %s, every field set\n", typ.Name())
		if err := enc.Encode(full.Interface()); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&buf, "// %s, empty\n", typ.Name())
		if err := enc.Encode(w); err != nil {
			t.Fatal(err)
		}
	}
	const golden = "testdata/wire.golden"
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -run TestWireGolden -update writes it)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("the admin API's JSON differs from %s (if on purpose: -update):\n%s", golden, buf.String())
	}
}
