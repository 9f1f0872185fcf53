package api

import (
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Forgiving names: every command that names a VIP or a backend (drain,
// weight, disable, enable, where, and the filters of status and conns)
// resolves it here, so that they all accept the same forms and fail
// alike. A VIP is named by its name, by ADDR:PORT[/PROTO], or by its
// address alone when one VIP has it; a backend by ADDR:PORT, or by its
// address alone when the VIP has it on one port. A name that matches
// none, or several, is a *NameError that lists the candidates.

// VIPName is what ResolveVIP knows of a VIP.
type VIPName struct {
	Name  string
	Addr  netip.Addr
	Port  uint16 // 0: every port
	Proto string // "tcp" or "udp"
}

// String names v as the errors show it: "web (198.18.0.100:80/tcp)".
func (v VIPName) String() string {
	return fmt.Sprintf("%s (%s/%s)", v.Name, HostPort(v.Addr.String(), v.Port), v.Proto)
}

// BackendName is what ResolveBackend knows of a backend.
type BackendName struct {
	Addr netip.Addr
	Port uint16 // 0: the client's destination port
}

// String is the backend's label: ADDR:PORT, or ADDR when its port is 0.
func (b BackendName) String() string {
	if b.Port == 0 {
		return b.Addr.String()
	}
	return netip.AddrPortFrom(b.Addr, b.Port).String()
}

// NameError is a VIP or backend name that matches no VIP or backend, or
// more than one. It wraps ErrNotFound (the admin API answers 404).
type NameError struct {
	// What is "VIP" or "backend"; Query the name as given; VIP, for a
	// backend, the name of the VIP it was looked for in.
	What, Query, VIP string
	// Ambiguous: Query matches every candidate. Otherwise it matches
	// none, and the candidates are the close ones, or all of them.
	Ambiguous  bool
	Candidates []string
	// More counts the candidates left out of Candidates.
	More int
}

// maxCandidates bounds the candidates an error lists.
const maxCandidates = 10

func (e *NameError) Error() string {
	var b strings.Builder
	switch {
	case e.Ambiguous && e.What == "VIP":
		fmt.Fprintf(&b, "%q names several VIPs", e.Query)
	case e.Ambiguous:
		fmt.Fprintf(&b, "%q names several backends of VIP %q", e.Query, e.VIP)
	case e.What == "VIP":
		fmt.Fprintf(&b, "no VIP %q", e.Query)
	default:
		fmt.Fprintf(&b, "VIP %q has no backend %q", e.VIP, e.Query)
	}
	if len(e.Candidates) == 0 {
		if e.What == "VIP" {
			b.WriteString(" (vipd runs no VIP)")
		} else {
			b.WriteString(" (it has no backends)")
		}
		return b.String()
	}
	b.WriteString("; did you mean ")
	for i, c := range e.Candidates {
		switch {
		case i == 0:
		case i == len(e.Candidates)-1 && e.More == 0:
			b.WriteString(" or ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(c)
	}
	if e.More > 0 {
		fmt.Fprintf(&b, " (or %d more: see vipd status)", e.More)
	}
	b.WriteString("?")
	return b.String()
}

func (e *NameError) Unwrap() error { return ErrNotFound }

// ResolveVIP returns the index in vips of the VIP q names: its name; else
// ADDR:PORT/PROTO; else ADDR:PORT (a VIP of that port, else one of every
// port at that address); else ADDR. Anything else, or a form that
// matches several VIPs, is a *NameError.
func ResolveVIP(vips []VIPName, q string) (int, error) {
	for i, v := range vips {
		if v.Name == q {
			return i, nil
		}
	}
	var match []int
	addr, port, proto, form := parseVIPQuery(q)
	switch form {
	case formAddrPort:
		for i, v := range vips {
			if v.Addr == addr && v.Port == port && (proto == "" || v.Proto == proto) {
				match = append(match, i)
			}
		}
		if len(match) == 0 {
			for i, v := range vips {
				if v.Addr == addr && v.Port == 0 && (proto == "" || v.Proto == proto) {
					match = append(match, i)
				}
			}
		}
	case formAddr:
		for i, v := range vips {
			if v.Addr == addr {
				match = append(match, i)
			}
		}
	}
	if len(match) == 1 {
		return match[0], nil
	}
	e := &NameError{What: "VIP", Query: q, Ambiguous: len(match) > 1}
	if !e.Ambiguous {
		match = closeVIPs(vips, q, addr)
	}
	for _, i := range match {
		e.add(vips[i].String())
	}
	return -1, e
}

// closeVIPs lists the VIPs q may have meant: those at q's address, or
// whose names are close to q; all of them if none is.
func closeVIPs(vips []VIPName, q string, addr netip.Addr) []int {
	var out []int
	for i, v := range vips {
		if (addr.IsValid() && v.Addr == addr) || closeName(v.Name, q) {
			out = append(out, i)
		}
	}
	if len(out) == 0 {
		for i := range vips {
			out = append(out, i)
		}
	}
	return out
}

// closeName reports whether q may be a misspelling of name: the same but
// for case, one contains the other, or a few edits apart (one per three
// letters, at most two).
func closeName(name, q string) bool {
	n, l := strings.ToLower(name), strings.ToLower(q)
	if l == "" {
		return false
	}
	return strings.Contains(n, l) || strings.Contains(l, n) || editDistance(n, l) <= min(2, len(l)/3)
}

// editDistance is the Levenshtein distance of a and b, by byte.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

type queryForm int

const (
	formName queryForm = iota
	formAddr
	formAddrPort
)

// parseVIPQuery reads q as ADDR, ADDR:PORT or ADDR:PORT/PROTO.
func parseVIPQuery(q string) (netip.Addr, uint16, string, queryForm) {
	proto := ""
	if i := strings.LastIndexByte(q, '/'); i >= 0 {
		proto = strings.ToLower(q[i+1:])
		q = q[:i]
		if proto != "tcp" && proto != "udp" {
			return netip.Addr{}, 0, "", formName
		}
	}
	if ap, err := netip.ParseAddrPort(q); err == nil {
		return ap.Addr().Unmap(), ap.Port(), proto, formAddrPort
	}
	if a, err := netip.ParseAddr(strings.Trim(q, "[]")); err == nil && proto == "" {
		return a.Unmap(), 0, "", formAddr
	}
	return netip.Addr{}, 0, "", formName
}

// ResolveBackend returns the index in backends (those of vip) of the
// backend q names: ADDR:PORT (for a backend of port 0, which keeps the
// client's destination port, ADDR:0 or ADDR:VIPPORT), or ADDR alone when
// the VIP has that address on one port only. Anything else, or an
// address on several ports, is a *NameError that lists the candidates.
func ResolveBackend(vip VIPName, backends []BackendName, q string) (int, error) {
	var match []int
	ap, apErr := netip.ParseAddrPort(q)
	a, aErr := netip.ParseAddr(strings.Trim(q, "[]"))
	var addr netip.Addr
	switch {
	case apErr == nil:
		addr = ap.Addr().Unmap()
		for i, b := range backends {
			if b.Addr == addr && (b.Port == ap.Port() || (b.Port == 0 && vip.Port != 0 && ap.Port() == vip.Port)) {
				match = append(match, i)
			}
		}
	case aErr == nil:
		addr = a.Unmap()
		for i, b := range backends {
			if b.Addr == addr {
				match = append(match, i)
			}
		}
	}
	if len(match) == 1 {
		return match[0], nil
	}
	e := &NameError{What: "backend", Query: q, VIP: vip.Name, Ambiguous: len(match) > 1}
	if !e.Ambiguous {
		// The backends at the address asked for, else every one.
		for i, b := range backends {
			if b.Addr == addr {
				match = append(match, i)
			}
		}
		if len(match) == 0 {
			for i := range backends {
				match = append(match, i)
			}
		}
	}
	for _, i := range match {
		e.add(backends[i].String())
	}
	return -1, e
}

func (e *NameError) add(c string) {
	if len(e.Candidates) < maxCandidates {
		e.Candidates = append(e.Candidates, c)
	} else {
		e.More++
	}
}

// ResolveVIP returns the VIP of st that q names (see the package's
// ResolveVIP): for commands that read /v1/state.
func (st *State) ResolveVIP(q string) (*VIPState, error) {
	names := make([]VIPName, len(st.VIPs))
	for i := range st.VIPs {
		names[i] = st.VIPs[i].name()
	}
	i, err := ResolveVIP(names, q)
	if err != nil {
		return nil, err
	}
	return &st.VIPs[i], nil
}

// ResolveBackend returns the backend of v that q names (see the
// package's ResolveBackend).
func (v *VIPState) ResolveBackend(q string) (*BackendState, error) {
	names := make([]BackendName, len(v.Backends))
	for i, b := range v.Backends {
		a, _ := netip.ParseAddr(b.Address)
		names[i] = BackendName{Addr: a, Port: b.Port}
	}
	i, err := ResolveBackend(v.name(), names, q)
	if err != nil {
		return nil, err
	}
	return &v.Backends[i], nil
}

func (v *VIPState) name() VIPName {
	a, _ := netip.ParseAddr(v.Address)
	return VIPName{Name: v.Name, Addr: a, Port: v.Port, Proto: v.Protocol}
}

// HostPort is addr and port as the tables show them: ADDR:PORT,
// [ADDR]:PORT for IPv6, ADDR:* for port 0 (every port, or the client's).
func HostPort(addr string, port uint16) string {
	p := "*"
	if port != 0 {
		p = fmt.Sprint(port)
	}
	if strings.Contains(addr, ":") {
		return "[" + addr + "]:" + p
	}
	return addr + ":" + p
}

// Seconds is a duration of s seconds rounded for a table: to the
// microsecond under 1 ms, to 10 µs under 1 s, to 10 ms above ("850µs",
// "1.25ms", "3.01s").
func Seconds(s float64) string {
	d := time.Duration(s * 1e9)
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(10 * time.Millisecond).String()
}
