package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// bgpBase is base with a [bgp] table and one peer.
var bgpBase = base + `
[bgp]
asn = 65010

[[bgp.peer]]
address = "198.18.0.1"
asn = 65000
`

func TestBGPValidationErrors(t *testing.T) {
	tests := []struct {
		name, src, key, msg string
	}{
		{"asn missing", strings.Replace(bgpBase, "[bgp]\nasn = 65010", "[bgp] #!\nrouter_id = \"198.18.1.1\"", 1), "bgp.asn", "required"},
		{"asn AS_TRANS", strings.Replace(bgpBase, "asn = 65010", "asn = 23456 #!", 1), "bgp.asn", "AS_TRANS"},
		{"asn negative", strings.Replace(bgpBase, "asn = 65010", "asn = -1 #!", 1), "bgp.asn", "from 0 to 4294967295"},
		{"router id IPv6", strings.Replace(bgpBase, "asn = 65010", "asn = 65010\nrouter_id = \"2001:db8::1\" #!", 1), "bgp.router_id", "IPv4"},
		{"hold time too short", strings.Replace(bgpBase, "asn = 65010", "asn = 65010\nhold_time = \"2s\" #!", 1), "bgp.hold_time", "from 3s"},
		{"hold time fraction", strings.Replace(bgpBase, "asn = 65010", "asn = 65010\nhold_time = \"3500ms\" #!", 1), "bgp.hold_time", "whole seconds"},
		{"keepalive not shorter", strings.Replace(bgpBase, "asn = 65010", "asn = 65010\nhold_time = \"9s\"\nkeepalive = \"9s\" #!", 1), "bgp.keepalive", "shorter than hold_time"},
		{"restart time too long", strings.Replace(bgpBase, "asn = 65010", "asn = 65010\ngraceful_restart = \"2h\" #!", 1), "bgp.graceful_restart", "12 bits"},
		{"linger negative", strings.Replace(bgpBase, "asn = 65010", "asn = 65010\nlinger = \"-1s\" #!", 1), "bgp.linger", "from 0s"},
		{"unknown bgp key", strings.Replace(bgpBase, "asn = 65010", "asn = 65010\nholdtime = \"9s\" #!", 1), "bgp.holdtime", `did you mean "hold_time"`},
		{"no peer", base + "\n[bgp] #!\nasn = 65010\n", "bgp", "at least one [[bgp.peer]]"},
		{"peer address missing", strings.Replace(bgpBase, "[[bgp.peer]]\naddress = \"198.18.0.1\"", "[[bgp.peer]] #!\nport = 179", 1), "bgp.peer[0].address", "required"},
		{"peer is a VIP", strings.Replace(bgpBase, "address = \"198.18.0.1\"", "address = \"198.18.0.100\" #!", 1), "bgp.peer[0].address", "a VIP's address"},
		{"duplicate peer", bgpBase + "[[bgp.peer]]\naddress = \"198.18.0.1\" #!\nasn = 65001\n", "bgp.peer[1].address", "duplicate peer"},
		{"peer asn missing", strings.Replace(strings.Replace(bgpBase, "asn = 65000", "passive = true", 1), "[[bgp.peer]]", "[[bgp.peer]] #!", 1), "bgp.peer[0].asn", "required"},
		{"peer port zero", bgpBase + "port = 0 #!\n", "bgp.peer[0].port", "from 1 to 65535"},
		{"password too long", bgpBase + "password = \"" + strings.Repeat("k", 81) + "\" #!\n", "bgp.peer[0].password", "at most 80"},
		{"family unknown", bgpBase + "families = [\"ipv4\", \"vpnv4\"] #!\n", "bgp.peer[0].families", `not "vpnv4"`},
		{"family twice", bgpBase + "families = [\"ipv4\", \"ipv4\"] #!\n", "bgp.peer[0].families", "twice"},
		{"no family", bgpBase + "families = [] #!\n", "bgp.peer[0].families", "at least one"},
		{"multihop ttl out of range", bgpBase + "multihop_ttl = 300 #!\n", "bgp.peer[0].multihop_ttl", "from 0 to 255"},
		{"passive without listen port", strings.Replace(bgpBase, "asn = 65010", "asn = 65010\nlisten_port = 0 #!", 1) + "passive = true\n", "bgp.listen_port", "passive"},
		{"peer unknown key", bgpBase + "adress = \"198.18.0.2\" #!\n", "bgp.peer[0].adress", `did you mean "address"`},
		{"announce without bgp", strings.Replace(base, "port = 80", "port = 80\nannounce = true #!", 1), "vip[0].announce", "needs a [bgp] table"},
		{"announce not a boolean", strings.Replace(bgpBase, "port = 80", "port = 80\nannounce = \"yes\" #!", 1), "vip[0].announce", "true or false"},
		{"bad community", strings.Replace(bgpBase, "port = 80", "port = 80\ncommunities = [\"65000:70000\"] #!", 1), "vip[0].communities", "ASN:VALUE"},
		{"community not a pair", strings.Replace(bgpBase, "port = 80", "port = 80\ncommunities = [\"no-export\"] #!", 1), "vip[0].communities", "ASN:VALUE"},
		{"min healthy above backends", strings.Replace(bgpBase, "port = 80", "port = 80\nmin_healthy = 3 #!", 1), "vip[0].min_healthy", "from 0 to the number of backends (2), not 3"},
		{"med negative", strings.Replace(bgpBase, "port = 80", "port = 80\nmed = -5 #!", 1), "vip[0].med", "from 0 to 4294967295"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Parse("bgp.toml", []byte(tt.src))
			var errs *Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Parse: got %v, want *Errors", err)
			}
			want := markLine(t, tt.src)
			for _, p := range errs.Problems {
				if p.Key == tt.key && strings.Contains(p.Msg, tt.msg) {
					if p.Line != want {
						t.Errorf("problem %q points at line %d, want %d", p, p.Line, want)
					}
					return
				}
			}
			t.Errorf("no problem with key %q and message containing %q; got:\n%v", tt.key, tt.msg, err)
		})
	}
}

func TestBGPDefaults(t *testing.T) {
	tests := []struct {
		name                   string
		src                    string
		wantBGP                bool
		announce, neighborAnns bool
	}{
		{"no bgp: not announced, ARP answered", base, false, false, true},
		{"bgp: announced, ARP not answered", bgpBase, true, true, false},
		{"bgp, VIP opted out: ARP answered", strings.Replace(bgpBase, "port = 80", "port = 80\nannounce = false", 1), true, false, true},
		{"bgp, both on", strings.Replace(bgpBase, "port = 80", "port = 80\nneighbor_announce = true", 1), true, true, true},
		{"no bgp, ARP off", strings.Replace(base, "port = 80", "port = 80\nneighbor_announce = false", 1), false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, _, err := Parse("d.toml", []byte(tt.src))
			if err != nil {
				t.Fatal(err)
			}
			if (cfg.BGP != nil) != tt.wantBGP {
				t.Fatalf("BGP = %+v, want present %v", cfg.BGP, tt.wantBGP)
			}
			v := &cfg.VIPs[0]
			if v.Announced() != tt.announce || v.AnswersNeighbors() != tt.neighborAnns {
				t.Errorf("announce %v, neighbor_announce %v; want %v, %v", v.Announced(), v.AnswersNeighbors(), tt.announce, tt.neighborAnns)
			}
			if v.MinHealthy != DefaultMinHealthy || v.MED != 0 || len(v.Communities) != 0 {
				t.Errorf("VIP BGP defaults wrong: min_healthy %d, med %d, communities %v", v.MinHealthy, v.MED, v.Communities)
			}
			if cfg.BGP == nil {
				return
			}
			b := cfg.BGP
			if b.HoldTime.D() != 90*time.Second || b.Keepalive.D() != 30*time.Second || b.Linger.D() != 30*time.Second ||
				!b.DrainOnStop || b.GracefulRestart != 0 || b.ListenPort != 179 || b.RouterID.IsValid() {
				t.Errorf("[bgp] defaults wrong: %+v", b)
			}
			p := b.Peers[0]
			if p.Port != 179 || p.Passive || p.Password != "" || p.MultihopTTL != 0 || !p.HasFamily(FamilyIPv4) || !p.HasFamily(FamilyIPv6) {
				t.Errorf("[[bgp.peer]] defaults wrong: %+v", p)
			}
		})
	}
}

func TestBGPWarnings(t *testing.T) {
	tests := []struct{ name, src, key, msg string }{
		{"keepalive over a third", strings.Replace(bgpBase, "asn = 65010", "asn = 65010\nhold_time = \"9s\"\nkeepalive = \"5s\"", 1), "bgp.keepalive", "a third"},
		{"communities on an unannounced VIP", strings.Replace(base, "port = 80", "port = 80\ncommunities = [\"65000:1\"]", 1), "vip[0].announce", "no effect"},
		{"per-box scheduler announced", strings.Replace(bgpBase, "port = 80", "port = 80\nscheduler = \"lc\"", 1), "vip[0].scheduler", "depends on the box"},
		{"BGP and ARP both", strings.Replace(bgpBase, "port = 80", "port = 80\nneighbor_announce = true", 1), "vip[0].neighbor_announce", "all answer"},
		{"min_healthy over the active backends", strings.Replace(strings.Replace(bgpBase, "port = 80", "port = 80\nmin_healthy = 2", 1), "port = 8080\n\n[[vip.backend]]", "port = 8080\nstate = \"draining\"\n\n[[vip.backend]]", 1), "vip[0].min_healthy", "1 backends are active"},
		{"no peer of the VIP's family", strings.Replace(bgpBase, "asn = 65000", "asn = 65000\nfamilies = [\"ipv6\"]", 1), "vip[0].announce", "announced to no router"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, warns, err := Parse("w.toml", []byte(tt.src))
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range warns {
				if w.Key == tt.key && strings.Contains(w.Msg, tt.msg) {
					return
				}
			}
			t.Errorf("no warning for %s containing %q; got %v", tt.key, tt.msg, warns)
		})
	}
}

func TestParseCommunity(t *testing.T) {
	tests := []struct {
		in   string
		want uint32
		ok   bool
	}{
		{"65000:100", 65000<<16 | 100, true},
		{"0:0", 0, true},
		{"65535:65535", 0xffffffff, true},
		{"65536:1", 0, false},
		{"1", 0, false},
		{"a:b", 0, false},
		{"1:2:3", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseCommunity(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseCommunity(%q) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}
