package api

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestResolveVIP(t *testing.T) {
	a := netip.MustParseAddr
	vips := []VIPName{
		{Name: "web", Addr: a("203.0.113.80"), Port: 80, Proto: "tcp"},
		{Name: "dns-tcp", Addr: a("203.0.113.53"), Port: 53, Proto: "tcp"},
		{Name: "dns-udp", Addr: a("203.0.113.53"), Port: 53, Proto: "udp"},
		{Name: "any", Addr: a("203.0.113.90"), Port: 0, Proto: "tcp"},
		{Name: "any-443", Addr: a("203.0.113.90"), Port: 443, Proto: "tcp"},
		{Name: "v6", Addr: a("2001:db8::80"), Port: 80, Proto: "tcp"},
	}
	for _, tt := range []struct {
		q    string
		want string // the VIP's name; "" for an error
		err  []string
	}{
		{q: "web", want: "web"},
		{q: "203.0.113.80", want: "web"},
		{q: "203.0.113.80:80", want: "web"},
		{q: "203.0.113.80:80/tcp", want: "web"},
		{q: "203.0.113.80:80/TCP", want: "web"},
		{q: "203.0.113.53:53/udp", want: "dns-udp"},
		{q: "[2001:db8::80]:80", want: "v6"},
		{q: "2001:db8::80", want: "v6"},
		{q: "[2001:db8::80]", want: "v6"},
		{q: "::ffff:203.0.113.80", want: "web"},
		// A port of its own wins over the every-port VIP at the address.
		{q: "203.0.113.90:443", want: "any-443"},
		{q: "203.0.113.90:8443", want: "any"},
		// Ambiguous: every match listed.
		{q: "203.0.113.53", err: []string{`"203.0.113.53" names several VIPs`, "dns-tcp (203.0.113.53:53/tcp) or dns-udp (203.0.113.53:53/udp)"}},
		{q: "203.0.113.53:53", err: []string{"several VIPs", "dns-tcp", "dns-udp"}},
		{q: "203.0.113.90", err: []string{"several VIPs", "any (203.0.113.90:*/tcp)", "any-443"}},
		// Unknown: the close ones, else all.
		{q: "Web", err: []string{`no VIP "Web"; did you mean web (203.0.113.80:80/tcp)?`}},
		{q: "dns", err: []string{"dns-tcp", "dns-udp"}},
		{q: "203.0.113.80:81", err: []string{`no VIP "203.0.113.80:81"; did you mean web (203.0.113.80:80/tcp)?`}},
		{q: "203.0.113.81", err: []string{"web (", "dns-tcp", "v6 ("}},
		{q: "203.0.113.80:80/sctp", err: []string{"no VIP", "web"}},
	} {
		i, err := ResolveVIP(vips, tt.q)
		if tt.want != "" {
			if err != nil || vips[i].Name != tt.want {
				t.Errorf("%q: %d %v, want %s", tt.q, i, err, tt.want)
			}
			continue
		}
		var ne *NameError
		if !errors.As(err, &ne) || !errors.Is(err, ErrNotFound) {
			t.Errorf("%q: %v, want a NameError", tt.q, err)
			continue
		}
		for _, s := range tt.err {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%q: %q lacks %q", tt.q, err, s)
			}
		}
	}
	if _, err := ResolveVIP(nil, "web"); err == nil || !strings.Contains(err.Error(), "runs no VIP") {
		t.Errorf("no VIPs: %v", err)
	}
}

func TestResolveBackend(t *testing.T) {
	a := netip.MustParseAddr
	web := VIPName{Name: "web", Addr: a("203.0.113.80"), Port: 80, Proto: "tcp"}
	backends := []BackendName{
		{Addr: a("198.51.100.11"), Port: 8080},
		{Addr: a("198.51.100.12"), Port: 8080},
		{Addr: a("198.51.100.12"), Port: 8081},
		{Addr: a("198.51.100.13"), Port: 0},
	}
	for _, tt := range []struct {
		q    string
		want int // -1: an error
		err  []string
	}{
		{"198.51.100.11:8080", 0, nil},
		{"198.51.100.11", 0, nil},
		{"[198.51.100.11]", 0, nil},
		{"198.51.100.12:8081", 2, nil},
		// Port 0 keeps the client's port: the VIP's port names it too.
		{"198.51.100.13", 3, nil},
		{"198.51.100.13:0", 3, nil},
		{"198.51.100.13:80", 3, nil},
		{"198.51.100.12", -1, []string{`"198.51.100.12" names several backends of VIP "web"; did you mean 198.51.100.12:8080 or 198.51.100.12:8081?`}},
		{"198.51.100.11:80", -1, []string{`VIP "web" has no backend "198.51.100.11:80"; did you mean 198.51.100.11:8080?`}},
		{"198.51.100.19", -1, []string{"198.51.100.11:8080, 198.51.100.12:8080, 198.51.100.12:8081 or 198.51.100.13?"}},
		{"nonsense", -1, []string{"no backend", "198.51.100.11:8080"}},
	} {
		i, err := ResolveBackend(web, backends, tt.q)
		if tt.want >= 0 {
			if err != nil || i != tt.want {
				t.Errorf("%q: %d %v, want %d", tt.q, i, err, tt.want)
			}
			continue
		}
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("%q: %v, want ErrNotFound", tt.q, err)
			continue
		}
		for _, s := range tt.err {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%q: %q lacks %q", tt.q, err, s)
			}
		}
	}
	// Many candidates: the list is cut short.
	var many []BackendName
	for i := range 15 {
		many = append(many, BackendName{Addr: netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}), Port: 80})
	}
	if _, err := ResolveBackend(web, many, "198.51.100.99"); err == nil || !strings.Contains(err.Error(), "(or 5 more: see vipd status)") {
		t.Errorf("many candidates: %v", err)
	}
}

// TestStateResolve: the State helpers read /v1/state's strings.
func TestStateResolve(t *testing.T) {
	st := &State{VIPs: []VIPState{{Name: "web", Address: "203.0.113.80", Port: 80, Protocol: "tcp",
		Backends: []BackendState{{Address: "198.51.100.11", Port: 8080}}}}}
	v, err := st.ResolveVIP("203.0.113.80")
	if err != nil || v.Name != "web" {
		t.Fatalf("%v %v", v, err)
	}
	b, err := v.ResolveBackend("198.51.100.11")
	if err != nil || b.Port != 8080 {
		t.Fatalf("%v %v", b, err)
	}
	if _, err := v.ResolveBackend("198.51.100.12"); err == nil || !strings.Contains(err.Error(), "did you mean 198.51.100.11:8080?") {
		t.Errorf("%v", err)
	}
}
