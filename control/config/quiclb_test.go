package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// quicBase is a valid QUIC-LB VIP: base's VIP made UDP, with one plaintext
// configuration and a server ID per backend. Cases edit it.
var quicBase = strings.NewReplacer(
	"port = 80\n", "port = 443\nprotocol = \"udp\"\n\n[vip.quic_lb]\n\n[[vip.quic_lb.config]]\nrotation = 0\nserver_id_len = 2\nnonce_len = 6\n",
	"address = \"198.18.1.11\"\nport = 8080", "address = \"198.18.1.11\"\nport = 8080\nquic_lb_server_ids = { 0 = \"0a01\" }",
	"address = \"198.18.1.12\"\nport = 8080", "address = \"198.18.1.12\"\nport = 8080\nquic_lb_server_ids = { 0 = \"0a02\" }",
).Replace(base)

func TestQUICLBLoads(t *testing.T) {
	cfg, warns, err := Parse("q.toml", []byte(quicBase))
	if err != nil {
		t.Fatalf("%v\n%s", err, quicBase)
	}
	if len(warns) != 0 {
		t.Errorf("warnings: %v", warns)
	}
	q := cfg.VIPs[0].QUICLB
	if q == nil || !q.Enabled || len(q.Configs) != 1 {
		t.Fatalf("quic_lb = %+v, want enabled with one configuration", q)
	}
	if c := q.Configs[0]; c.Rotation != 0 || c.ServerIDLen != 2 || c.NonceLen != 6 || c.Key != nil {
		t.Errorf("configuration = %+v", c)
	}
	if got := cfg.VIPs[0].Backends[1].QUICLBServerIDs[0]; !bytes.Equal(got, []byte{0x0a, 0x02}) {
		t.Errorf("backend[1]'s server ID = %x, want 0a02", got)
	}
}

func TestQUICLBErrors(t *testing.T) {
	set := func(old, new string) string {
		if !strings.Contains(quicBase, old) {
			panic("no " + old)
		}
		return strings.Replace(quicBase, old, new, 1)
	}
	tests := []struct {
		name, src, key, msg string
	}{
		{"on a TCP VIP", set("protocol = \"udp\"\n\n[vip.quic_lb]", "protocol = \"tcp\"\n\n[vip.quic_lb] #!"), "vip[0].quic_lb", "needs protocol"},
		{"no configuration", strings.Replace(set("[vip.quic_lb]\n", "[vip.quic_lb] #!\n"), "[[vip.quic_lb.config]]\nrotation = 0\nserver_id_len = 2\nnonce_len = 6\n", "", 1), "vip[0].quic_lb.config", "at least one"},
		{"rotation missing", set("[[vip.quic_lb.config]]\nrotation = 0\n", "[[vip.quic_lb.config]] #!\n"), "vip[0].quic_lb.config[0].rotation", "required"},
		{"rotation 7", set("rotation = 0", "rotation = 7 #!"), "vip[0].quic_lb.config[0].rotation", "0b111"},
		{"rotation twice", set("nonce_len = 6\n", "nonce_len = 6\n\n[[vip.quic_lb.config]]\nrotation = 0 #!\nserver_id_len = 2\nnonce_len = 6\n"), "vip[0].quic_lb.config[1].rotation", "given twice"},
		{"server ID empty", set("server_id_len = 2", "server_id_len = 0 #!"), "vip[0].quic_lb.config[0].server_id_len", "at least 1"},
		{"nonce short", set("nonce_len = 6", "nonce_len = 3 #!"), "vip[0].quic_lb.config[0].nonce_len", "at least 4"},
		{"too long", set("nonce_len = 6", "nonce_len = 18 #!"), "vip[0].quic_lb.config[0].nonce_len", "at most 19"},
		{"key file missing", set("nonce_len = 6", "nonce_len = 6\nkey_file = \"/nonexistent/vipd-quic.key\" #!"), "vip[0].quic_lb.config[0].key_file", "no such file"},
		{"server ID length", set("{ 0 = \"0a01\" }", "{ 0 = \"0a0101\" } #!"), "vip[0].backend[0].quic_lb_server_ids", "server_id_len is 2"},
		{"server ID not hex", set("{ 0 = \"0a01\" }", "{ 0 = \"zz01\" } #!"), "vip[0].backend[0].quic_lb_server_ids", "not a server ID in hex"},
		{"server ID of no configuration", set("{ 0 = \"0a01\" }", "{ 0 = \"0a01\", 3 = \"0b01\" } #!"), "vip[0].backend[0].quic_lb_server_ids", "configuration 3"},
		{"server ID codepoint", set("{ 0 = \"0a01\" }", "{ 9 = \"0a01\" } #!"), "vip[0].backend[0].quic_lb_server_ids", "0 to 6"},
		{"server ID twice", set("{ 0 = \"0a02\" }", "{ 0 = \"0a01\" } #!"), "vip[0].backend[1].quic_lb_server_ids", "backend[0]'s too"},
		{"server IDs without QUIC-LB", strings.Replace(base, "port = 8080", "port = 8080\nquic_lb_server_ids = { 0 = \"0a01\" } #!", 1), "vip[0].backend[0].quic_lb_server_ids", "no [vip.quic_lb]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Parse("test.toml", []byte(tt.src))
			var errs *Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Parse: got %v, want *Errors\n%s", err, tt.src)
			}
			want := markLine(t, tt.src)
			for _, p := range errs.Problems {
				if p.Key == tt.key && strings.Contains(p.Msg, tt.msg) {
					if p.Line != want {
						t.Errorf("%q points at line %d, want %d", p, p.Line, want)
					}
					return
				}
			}
			t.Errorf("no problem with key %q containing %q; got:\n%v", tt.key, tt.msg, err)
		})
	}
}

// TestQUICLBKeyFile: a key is read from its file, hex or raw, relative to
// the configuration file; a wrong one is refused; and the key's octets
// appear in no message, no print of the configuration and no JSON.
func TestQUICLBKeyFile(t *testing.T) {
	dir := t.TempDir()
	key := []byte{0xfd, 0xf7, 0x26, 0xa9, 0x89, 0x3e, 0xc0, 0x5c, 0x06, 0x32, 0xd3, 0x95, 0x66, 0x80, 0xba, 0xf0}
	hexKey := fmt.Sprintf("%x", key)
	write := func(name string, content []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, content, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("hex.key", []byte(hexKey+"\n"), 0o600)
	write("raw.key", key, 0o600)
	write("short.key", []byte(hexKey[:30]), 0o600)
	write("open.key", []byte(hexKey), 0o644)
	tests := []struct {
		name, file string
		ok         bool
		msg        string // of the error or the warning
	}{
		{"hex, relative", "hex.key", true, ""},
		{"raw, absolute", filepath.Join(dir, "raw.key"), true, ""},
		{"short", "short.key", false, "16-octet"},
		{"readable by others", "open.key", true, "chmod 600"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := strings.Replace(quicBase, "nonce_len = 6", "nonce_len = 6\nkey_file = \""+tt.file+"\"", 1)
			cfg, warns, err := Parse(filepath.Join(dir, "vipd.toml"), []byte(src))
			all := fmt.Sprint(err, warns)
			if tt.msg != "" && !strings.Contains(all, tt.msg) {
				t.Errorf("want a problem containing %q; got %s", tt.msg, all)
			}
			if strings.Contains(all, hexKey) || strings.Contains(all, string(key)) {
				t.Fatalf("a message shows the key: %s", all)
			}
			if !tt.ok {
				if err == nil {
					t.Fatal("loaded")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			qc := cfg.VIPs[0].QUICLB.Configs[0]
			if !bytes.Equal(qc.Key, key) {
				t.Fatalf("key = %x, want %x", []byte(qc.Key), key)
			}
			if !bytes.Equal(qc.Quiclb().Key, key) {
				t.Error("Quiclb() lost the key")
			}
			j, err := json.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{fmt.Sprintf("%v", cfg.VIPs[0]), fmt.Sprintf("%+v", qc), fmt.Sprintf("%#v", qc), string(j)} {
				if strings.Contains(s, hexKey) || strings.Contains(s, fmt.Sprint([]byte(key))) || strings.Contains(s, string(key)) {
					t.Errorf("the key shows in %s", s)
				}
			}
		})
	}
}

func TestQUICLBWarnings(t *testing.T) {
	src := strings.Replace(strings.Replace(quicBase, "quic_lb_server_ids = { 0 = \"0a01\" }", "", 1), "quic_lb_server_ids = { 0 = \"0a02\" }", "", 1)
	_, warns, err := Parse("w.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range warns {
		if w.Key == "vip[0].quic_lb.config" && strings.Contains(w.Msg, "route nowhere") {
			return
		}
	}
	t.Errorf("no warning about a configuration without server IDs; got %v", warns)
}

func TestQUICLBDisabled(t *testing.T) {
	cfg, _, err := Parse("d.toml", []byte(strings.Replace(quicBase, "[vip.quic_lb]\n", "[vip.quic_lb]\nenabled = false\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.VIPs[0].QUICLB.Enabled {
		t.Error("enabled = false loaded as enabled")
	}
}

// TestQUICLBDiff: a reload's report names a changed QUIC-LB table and a
// changed server ID, readably and without the key.
func TestQUICLBDiff(t *testing.T) {
	a := mustParse(t, quicBase)
	b := mustParse(t, strings.Replace(strings.Replace(quicBase, "nonce_len = 6\n", "nonce_len = 6\n\n[[vip.quic_lb.config]]\nrotation = 1\nserver_id_len = 2\nnonce_len = 6\n", 1),
		`{ 0 = "0a02" }`, `{ 0 = "0a02", 1 = "0b02" }`, 1))
	var got []string
	for _, c := range Compare(a, b).Keys {
		got = append(got, c.String())
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{
		`quic_lb changed (0 (2+6, plaintext) → 0 (2+6, plaintext), 1 (2+6, plaintext))`,
		`quic_lb_server_ids changed ({ 0 = "0a02" } → { 0 = "0a02", 1 = "0b02" })`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("report lacks %q; got:\n%s", want, all)
		}
	}
}
