package config

import (
	"encoding"
	"reflect"
)

// schemaKey is one key of the schema: its dotted path without indices
// ("vip.backend.weight") and whether it names a table.
type schemaKey struct {
	Path  string
	Table bool
}

// schemaKeys lists every key of the schema in declaration order. It keeps
// the documentation in config.toml.example complete.
func schemaKeys() []schemaKey {
	var keys []schemaKey
	var walk func(prefix string, t reflect.Type)
	walk = func(prefix string, t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("toml")
			if tag == "" || tag == "-" {
				continue
			}
			key := join(prefix, tag)
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Slice {
				ft = ft.Elem()
			}
			// A struct that reads itself from a string (netip.Addr,
			// netip.Prefix) is a value, not a table.
			table := ft.Kind() == reflect.Struct && !reflect.PointerTo(ft).Implements(textUnmarshaler)
			keys = append(keys, schemaKey{key, table})
			if table {
				walk(key, ft)
			}
		}
	}
	walk("", reflect.TypeOf(Config{}))
	return keys
}

var textUnmarshaler = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()
