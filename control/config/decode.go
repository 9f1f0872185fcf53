package config

import (
	"encoding"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// valueDecoder is implemented by a type that reads itself from a TOML value
// of more than one kind (FastPathMode: a string or a boolean).
type valueDecoder interface{ decodeValue(src any) error }

// defaulter is implemented by elements of arrays of tables, which come into
// existence during decoding and so cannot be pre-filled with defaults.
type defaulter interface{ setDefaults() }

// decode copies the generic TOML value src (as produced by toml.Decode into a
// map) into dst, which already holds the defaults. Unlike a plain
// toml.Decode into a struct it does not stop at the first problem: every
// unknown key and every value of the wrong type or out of range is recorded
// with its full, indexed key path, and decoding goes on.
func (c *collector) decode(path string, src any, dst reflect.Value) {
	if dst.CanAddr() {
		if vd, ok := dst.Addr().Interface().(valueDecoder); ok {
			if err := vd.decodeValue(src); err != nil {
				c.errorf(path, "%v", err)
			}
			return
		}
		if tu, ok := dst.Addr().Interface().(encoding.TextUnmarshaler); ok {
			s, ok := src.(string)
			if !ok {
				c.errorf(path, "must be a string, not %s", describe(src))
				return
			}
			if err := tu.UnmarshalText([]byte(s)); err != nil {
				c.errorf(path, "%v", err)
			}
			return
		}
	}
	switch dst.Kind() {
	case reflect.Pointer:
		// An optional table or value: nil when the file does not have it.
		v := reflect.New(dst.Type().Elem())
		if d, ok := v.Interface().(defaulter); ok {
			d.setDefaults()
		}
		c.decode(path, src, v.Elem())
		dst.Set(v)
	case reflect.Struct:
		m, ok := src.(map[string]any)
		if !ok {
			c.errorf(path, "must be a table, not %s", describe(src))
			return
		}
		c.decodeStruct(path, m, dst)
	case reflect.Slice:
		c.decodeSlice(path, src, dst)
	case reflect.String:
		s, ok := src.(string)
		if !ok {
			c.errorf(path, "must be a string, not %s", describe(src))
			return
		}
		dst.SetString(s)
	case reflect.Bool:
		b, ok := src.(bool)
		if !ok {
			c.errorf(path, "must be true or false, not %s", describe(src))
			return
		}
		dst.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := src.(int64)
		bits := dst.Type().Bits()
		lo, hi := int64(-1)<<(bits-1), int64(math.MaxInt64>>(64-bits))
		if !ok || n < lo || n > hi {
			c.errorf(path, "must be an integer from %d to %d, not %s", lo, hi, describe(src))
			return
		}
		dst.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := src.(int64)
		bits := dst.Type().Bits()
		hi := uint64(math.MaxUint64 >> (64 - bits))
		if hi > math.MaxInt64 {
			hi = math.MaxInt64 // the largest integer TOML can write
		}
		if !ok || n < 0 || uint64(n) > hi {
			c.errorf(path, "must be an integer from 0 to %d, not %s", hi, describe(src))
			return
		}
		dst.SetUint(uint64(n))
	case reflect.Float32, reflect.Float64:
		// TOML's floats, and its integers where a number is asked for
		// (failure_ratio = 1).
		switch n := src.(type) {
		case float64:
			dst.SetFloat(n)
		case int64:
			dst.SetFloat(float64(n))
		default:
			c.errorf(path, "must be a number, not %s", describe(src))
		}
	default:
		// A schema type this decoder does not handle is a programming
		// error, caught by the tests that load the example file.
		panic(fmt.Sprintf("config: cannot decode into %s at %s", dst.Type(), path))
	}
}

func (c *collector) decodeStruct(path string, m map[string]any, dst reflect.Value) {
	fields := tomlFields(dst.Type())
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		sub := join(path, k)
		i, ok := fields[k]
		if !ok {
			c.errorf(sub, "unknown key %q%s", k, suggest(k, fields))
			continue
		}
		c.decode(sub, m[k], dst.Field(i))
	}
}

func (c *collector) decodeSlice(path string, src any, dst reflect.Value) {
	var elems []any
	switch s := src.(type) {
	case []any:
		elems = s
	case []map[string]any:
		for _, e := range s {
			elems = append(elems, e)
		}
	default:
		c.errorf(path, "must be an array, not %s", describe(src))
		return
	}
	out := reflect.MakeSlice(dst.Type(), len(elems), len(elems))
	for i, e := range elems {
		el := out.Index(i)
		if d, ok := el.Addr().Interface().(defaulter); ok {
			d.setDefaults()
		}
		c.decode(path+"["+strconv.Itoa(i)+"]", e, el)
	}
	dst.Set(out)
}

// tomlFields maps the toml tag of every exported field of t to its index.
// fieldCache holds tomlFields' answers by type.
var fieldCache sync.Map

func tomlFields(t reflect.Type) map[string]int {
	// Cached by type: a fleet's document decodes 100,000 backends of
	// one type. The map returned is shared: callers only read it.
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]int)
	}
	fields := make(map[string]int)
	defer func() { fieldCache.Store(t, fields) }()
	for i := 0; i < t.NumField(); i++ {
		tag := t.Field(i).Tag.Get("toml")
		if tag == "" || tag == "-" {
			continue
		}
		fields[tag] = i
	}
	return fields
}

// suggest names the closest known key to a misspelt one, and otherwise lists
// the known keys.
func suggest(k string, fields map[string]int) string {
	names := make([]string, 0, len(fields))
	best, bestD := "", 3 // suggest only within an edit distance of 2
	for name := range fields {
		names = append(names, name)
		if d := editDistance(strings.ToLower(k), name); d < bestD {
			best, bestD = name, d
		}
	}
	if best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	sort.Strings(names)
	return " (known keys: " + strings.Join(names, ", ") + ")"
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func describe(v any) string {
	switch x := v.(type) {
	case string:
		return "the string " + strconv.Quote(x)
	case int64:
		return "the integer " + strconv.FormatInt(x, 10)
	case float64:
		return "the float " + strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return "the boolean " + strconv.FormatBool(x)
	case time.Time:
		return "a date/time"
	case []any, []map[string]any:
		return "an array"
	case map[string]any:
		return "a table"
	}
	return fmt.Sprintf("a %T", v)
}
