package config

import (
	"fmt"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
)

// Diff is what differs between two configurations, by key: what a reload
// from one to the other changes. VIPs are matched by name and backends by
// address and port, so that reordering the file changes nothing.
type Diff struct {
	VIPsAdded, VIPsRemoved         []string // VIP names
	BackendsAdded, BackendsRemoved []BackendID
	Reweighted                     []Reweight
	// Keys are every other key that differs, in file order.
	Keys []Change
}

// BackendID names a backend of a VIP: Backend is "addr:port", or "addr"
// for a backend that keeps the client's port (port 0).
type BackendID struct {
	VIP, Backend string
}

// Reweight is a backend of a VIP whose weight changed.
type Reweight struct {
	BackendID
	Old, New uint32
}

// Change is one key whose value differs.
type Change struct {
	// Table is the table as the file's header names it, without the
	// brackets: "dataplane", "bgp", `vip "web"`.
	Table string
	// Key is the key in the table, dotted for a nested table
	// ("healthcheck.interval"); "" when the whole table came or went.
	Key string
	// Old and New are the values as the file writes them ("unset" for
	// none); both "" when they are not printed (a list of tables, a
	// password, a table that came or went: then Old or New is "").
	Old, New string
	// Gone, for a Key of "": the table was removed (else added).
	Gone bool
}

func (c Change) String() string {
	if c.Key == "" {
		if c.Gone {
			return "[" + c.Table + "] removed"
		}
		return "[" + c.Table + "] added"
	}
	s := "[" + c.Table + "] " + c.Key + " changed"
	if c.Old != "" || c.New != "" {
		s += " (" + c.Old + " → " + c.New + ")"
	}
	return s
}

// Empty reports whether the two configurations are the same.
func (d *Diff) Empty() bool {
	return len(d.VIPsAdded)+len(d.VIPsRemoved)+len(d.BackendsAdded)+len(d.BackendsRemoved)+len(d.Reweighted)+len(d.Keys) == 0
}

// Compare returns what differs from old to new.
func Compare(old, new *Config) *Diff {
	d := &Diff{}
	diffStruct(&d.Keys, "dataplane", "", reflect.ValueOf(old.Dataplane), reflect.ValueOf(new.Dataplane))
	diffStruct(&d.Keys, "conntrack", "", reflect.ValueOf(old.Conntrack), reflect.ValueOf(new.Conntrack))
	diffStruct(&d.Keys, "admin", "", reflect.ValueOf(old.Admin), reflect.ValueOf(new.Admin))
	d.diffBGP(old.BGP, new.BGP)
	d.diffFleet(old.Fleet, new.Fleet)
	d.diffVIPs(old.VIPs, new.VIPs)
	return d
}

// diffFleet compares [fleet]: the table coming or going, or its keys (the
// password is never printed: only password_file, the path, is).
func (d *Diff) diffFleet(a, b *Fleet) {
	switch {
	case a == nil && b == nil:
	case a == nil:
		d.Keys = append(d.Keys, Change{Table: "fleet"})
	case b == nil:
		d.Keys = append(d.Keys, Change{Table: "fleet", Gone: true})
	default:
		diffStruct(&d.Keys, "fleet", "", reflect.ValueOf(*a), reflect.ValueOf(*b))
	}
}

func (d *Diff) diffBGP(a, b *BGP) {
	switch {
	case a == nil && b == nil:
		return
	case a == nil:
		d.Keys = append(d.Keys, Change{Table: "bgp"})
		return
	case b == nil:
		d.Keys = append(d.Keys, Change{Table: "bgp", Gone: true})
		return
	}
	diffStruct(&d.Keys, "bgp", "", reflect.ValueOf(*a), reflect.ValueOf(*b))
	// Peers by address.
	olds := map[netip.Addr]*Peer{}
	var oldAddrs, newAddrs []string
	for i := range a.Peers {
		olds[a.Peers[i].Address] = &a.Peers[i]
		oldAddrs = append(oldAddrs, a.Peers[i].Address.String())
	}
	for i := range b.Peers {
		newAddrs = append(newAddrs, b.Peers[i].Address.String())
	}
	if strings.Join(oldAddrs, ",") != strings.Join(newAddrs, ",") {
		d.Keys = append(d.Keys, Change{Table: "bgp", Key: "peer", Old: "[" + strings.Join(oldAddrs, ", ") + "]", New: "[" + strings.Join(newAddrs, ", ") + "]"})
	}
	for i := range b.Peers {
		p := &b.Peers[i]
		if o, ok := olds[p.Address]; ok {
			diffStruct(&d.Keys, "bgp", "peer "+p.Address.String()+" ", reflect.ValueOf(*o), reflect.ValueOf(*p))
		}
	}
}

func (d *Diff) diffVIPs(a, b []VIP) {
	olds := map[string]*VIP{}
	for i := range a {
		olds[a[i].Name] = &a[i]
	}
	news := map[string]bool{}
	for i := range b {
		v := &b[i]
		news[v.Name] = true
		o, ok := olds[v.Name]
		if !ok {
			d.VIPsAdded = append(d.VIPsAdded, v.Name)
			continue
		}
		diffStruct(&d.Keys, "vip "+strconv.Quote(v.Name), "", reflect.ValueOf(*o), reflect.ValueOf(*v))
		d.diffBackends(v.Name, o.Backends, v.Backends)
	}
	for i := range a {
		if !news[a[i].Name] {
			d.VIPsRemoved = append(d.VIPsRemoved, a[i].Name)
		}
	}
}

func (d *Diff) diffBackends(vip string, a, b []Backend) {
	id := func(b *Backend) string {
		if b.Port == 0 {
			return b.Address.String()
		}
		return netip.AddrPortFrom(b.Address, b.Port).String()
	}
	olds := map[string]*Backend{}
	for i := range a {
		olds[id(&a[i])] = &a[i]
	}
	news := map[string]bool{}
	for i := range b {
		nb := &b[i]
		k := id(nb)
		news[k] = true
		ob, ok := olds[k]
		if !ok {
			d.BackendsAdded = append(d.BackendsAdded, BackendID{vip, k})
			continue
		}
		if ob.Weight != nb.Weight {
			d.Reweighted = append(d.Reweighted, Reweight{BackendID{vip, k}, ob.Weight, nb.Weight})
		}
		if ob.State != nb.State {
			d.Keys = append(d.Keys, Change{Table: "vip " + strconv.Quote(vip), Key: "backend " + k + " state", Old: printValue(reflect.ValueOf(ob.State)), New: printValue(reflect.ValueOf(nb.State))})
		}
		if !reflect.DeepEqual(ob.QUICLBServerIDs, nb.QUICLBServerIDs) {
			d.Keys = append(d.Keys, Change{Table: "vip " + strconv.Quote(vip), Key: "backend " + k + " quic_lb_server_ids", Old: ob.QUICLBServerIDs.String(), New: nb.QUICLBServerIDs.String()})
		}
	}
	for i := range a {
		if k := id(&a[i]); !news[k] {
			d.BackendsRemoved = append(d.BackendsRemoved, BackendID{vip, k})
		}
	}
}

// diffStruct appends a Change for each field of a and b (structs of the
// same type) that differs, named by its toml tag after prefix; nested
// tables are walked. Lists of tables (VIPs, backends, peers) are left to
// the callers, which match their elements by identity.
func diffStruct(out *[]Change, table, prefix string, a, b reflect.Value) {
	t := a.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "" {
			name = f.Name
		}
		if name == "-" || !f.IsExported() {
			continue
		}
		x, y := a.Field(i), b.Field(i)
		switch {
		case f.Type == reflect.TypeFor[*QUICLB]():
			// One change for the table, its configurations summed up.
			if !reflect.DeepEqual(x.Interface(), y.Interface()) {
				*out = append(*out, Change{Table: table, Key: prefix + name, Old: x.Interface().(*QUICLB).summary(), New: y.Interface().(*QUICLB).summary()})
			}
			continue
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			continue // VIPs, backends, peers
		case f.Type.Kind() == reflect.Struct && !leaf(f.Type):
			diffStruct(out, table, prefix+name+".", x, y)
			continue
		}
		if equalValue(x, y) {
			continue
		}
		c := Change{Table: table, Key: prefix + name}
		if name != "password" { // never printed
			c.Old, c.New = printValue(x), printValue(y)
		}
		*out = append(*out, c)
	}
}

// leaf reports whether a struct type is one value in the file (an
// address, a prefix), not a table.
func leaf(t reflect.Type) bool {
	return t == reflect.TypeFor[netip.Addr]() || t == reflect.TypeFor[netip.Prefix]()
}

// equalValue compares two values of a field; an absent list equals an
// empty one.
func equalValue(x, y reflect.Value) bool {
	if x.Kind() == reflect.Slice {
		if x.Len() != y.Len() {
			return false
		}
		for i := range x.Len() {
			if !reflect.DeepEqual(x.Index(i).Interface(), y.Index(i).Interface()) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(x.Interface(), y.Interface())
}

// printValue writes v as the file would: strings, addresses and durations
// quoted, numbers and booleans bare, lists in brackets, "unset" for a nil
// pointer or an unset address.
func printValue(v reflect.Value) string {
	switch x := v.Interface().(type) {
	case netip.Addr:
		if !x.IsValid() {
			return "unset"
		}
		return strconv.Quote(x.String())
	case netip.Prefix:
		if !x.IsValid() {
			return "unset"
		}
		return strconv.Quote(x.String())
	case Duration:
		return strconv.Quote(x.String())
	case ServerIDs:
		return x.String()
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return "unset"
		}
		return printValue(v.Elem())
	case reflect.String:
		return strconv.Quote(v.String())
	case reflect.Slice:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = printValue(v.Index(i))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return fmt.Sprint(v.Interface())
}
