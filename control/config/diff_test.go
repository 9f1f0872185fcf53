package config

import (
	"reflect"
	"strings"
	"testing"
)

const diffBase = `
[dataplane]
ingress = "eth0"
queues = 2

[[vip]]
name = "web"
address = "198.18.0.10"
port = 80
[vip.healthcheck]
interval = "2s"
[[vip.backend]]
address = "198.18.1.1"
port = 8080
[[vip.backend]]
address = "198.18.1.2"
port = 8080

[[vip]]
name = "dns"
address = "198.18.0.11"
port = 53
protocol = "udp"
[[vip.backend]]
address = "198.18.1.3"
port = 53
`

func mustParse(t *testing.T, src string) *Config {
	t.Helper()
	cfg, _, err := Parse("diff.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestCompare(t *testing.T) {
	tests := []struct {
		name string
		edit func(string) string
		want func(*Diff) any // the part of the diff the case is about
		same any
	}{
		{
			name: "nothing",
			edit: func(s string) string { return s },
			want: func(d *Diff) any { return d.Empty() },
			same: true,
		},
		{
			name: "reordered VIPs",
			edit: func(s string) string {
				i := strings.Index(s, "[[vip]]\nname = \"dns\"")
				j := strings.Index(s, "[[vip]]")
				return s[:j] + s[i:] + "\n" + s[j:i]
			},
			want: func(d *Diff) any { return d.Empty() },
			same: true,
		},
		{
			name: "queues",
			edit: func(s string) string { return strings.Replace(s, "queues = 2", "queues = 4", 1) },
			want: func(d *Diff) any { return stringsOf(d.Keys) },
			same: []string{"[dataplane] queues changed (2 → 4)"},
		},
		{
			name: "ingress and a default key",
			edit: func(s string) string {
				return strings.Replace(s, `ingress = "eth0"`, "ingress = \"eth1\"\nxdp_mode = \"native\"", 1)
			},
			want: func(d *Diff) any { return stringsOf(d.Keys) },
			same: []string{`[dataplane] ingress changed ("eth0" → "eth1")`, `[dataplane] xdp_mode changed ("auto" → "native")`},
		},
		{
			name: "nested VIP key",
			edit: func(s string) string { return strings.Replace(s, `interval = "2s"`, `interval = "5s"`, 1) },
			want: func(d *Diff) any { return stringsOf(d.Keys) },
			same: []string{`[vip "web"] healthcheck.interval changed ("2s" → "5s")`},
		},
		{
			name: "VIP added and removed",
			edit: func(s string) string { return strings.Replace(s, `name = "dns"`, `name = "dns2"`, 1) },
			want: func(d *Diff) any { return [][]string{d.VIPsAdded, d.VIPsRemoved} },
			same: [][]string{{"dns2"}, {"dns"}},
		},
		{
			name: "backend added, removed, reweighted, state",
			edit: func(s string) string {
				s = strings.Replace(s, "address = \"198.18.1.1\"\nport = 8080", "address = \"198.18.1.1\"\nport = 8080\nweight = 200\nstate = \"draining\"", 1)
				return strings.Replace(s, "address = \"198.18.1.2\"\nport = 8080", "address = \"198.18.1.4\"\nport = 8080", 1)
			},
			want: func(d *Diff) any {
				return []any{d.BackendsAdded, d.BackendsRemoved, d.Reweighted, stringsOf(d.Keys)}
			},
			same: []any{
				[]BackendID{{"web", "198.18.1.4:8080"}},
				[]BackendID{{"web", "198.18.1.2:8080"}},
				[]Reweight{{BackendID{"web", "198.18.1.1:8080"}, 1, 200}},
				[]string{`[vip "web"] backend 198.18.1.1:8080 state changed ("active" → "draining")`},
			},
		},
		{
			name: "bgp added",
			edit: func(s string) string {
				return strings.Replace(s, "[[vip]]", "[bgp]\nasn = 65001\nrouter_id = \"198.18.0.1\"\n[[bgp.peer]]\naddress = \"198.18.0.254\"\nasn = 65000\n\n[[vip]]", 1)
			},
			want: func(d *Diff) any { return d.Keys[0].String() },
			same: "[bgp] added",
		},
	}
	old := mustParse(t, diffBase)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Compare(old, mustParse(t, tt.edit(diffBase)))
			if got := tt.want(d); !reflect.DeepEqual(got, tt.same) {
				t.Errorf("got %#v, want %#v (diff %+v)", got, tt.same, d)
			}
		})
	}
}

func TestCompareBGPPeers(t *testing.T) {
	src := strings.Replace(diffBase, "[[vip]]", "[bgp]\nasn = 65001\nrouter_id = \"198.18.0.1\"\n[[bgp.peer]]\naddress = \"198.18.0.254\"\nasn = 65000\npassword = \"s3cret\"\n\n[[vip]]", 1)
	old := mustParse(t, src)
	edited := strings.Replace(src, `password = "s3cret"`, `password = "other"`+"\nport = 1179", 1)
	got := stringsOf(Compare(old, mustParse(t, edited)).Keys)
	want := []string{"[bgp] peer 198.18.0.254 port changed (179 → 1179)", "[bgp] peer 198.18.0.254 password changed"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	for _, s := range got {
		if strings.Contains(s, "s3cret") || strings.Contains(s, "other") {
			t.Errorf("%q prints a password", s)
		}
	}
	gone := Compare(old, mustParse(t, diffBase))
	// Without [bgp], announce and neighbor_announce default otherwise:
	// they change too, and say so.
	if len(gone.Keys) != 5 || gone.Keys[0].String() != "[bgp] removed" || gone.Keys[1].String() != `[vip "web"] announce changed (true → false)` {
		t.Errorf("removing [bgp]: %q", stringsOf(gone.Keys))
	}
}

func stringsOf(cs []Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.String())
	}
	return out
}
