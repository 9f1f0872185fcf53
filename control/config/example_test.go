package config

// The example configuration (config.toml.example, shipped as
// /etc/vipd/vipd.toml) against the schema and the defaults.

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/vipd/vipd/hashing"
)

func TestExample(t *testing.T) {
	path := filepath.Join("..", "..", "config.toml.example")
	cfg, warns, err := Load(path)
	if err != nil {
		t.Fatalf("the example must load: %v", err)
	}
	if len(warns) != 0 {
		t.Errorf("the example must not warn: %v", warns)
	}
	modes := map[Mode]bool{}
	for _, v := range cfg.VIPs {
		modes[v.Mode] = true
	}
	if !modes[ModeNAT] || !modes[ModeDSR] {
		t.Errorf("the example must show a NAT and a DSR VIP")
	}
}

// TestExampleSetsDefaults: the example sets every key of [dataplane]
// (but the interfaces), [conntrack] and [admin] to its default, as its
// comments say, so a changed default cannot leave the example behind.
func TestExampleSetsDefaults(t *testing.T) {
	cfg, _, err := Load(filepath.Join("..", "..", "config.toml.example"))
	if err != nil {
		t.Fatal(err)
	}
	def := Default()
	dp := cfg.Dataplane
	dp.Ingress, dp.Egress = def.Dataplane.Ingress, def.Dataplane.Egress
	if dp != def.Dataplane {
		t.Errorf("[dataplane] of the example: %+v\ndefaults: %+v", dp, def.Dataplane)
	}
	if cfg.Conntrack != def.Conntrack {
		t.Errorf("[conntrack] of the example: %+v\ndefaults: %+v", cfg.Conntrack, def.Conntrack)
	}
	if !cfg.Admin.Equal(&def.Admin) {
		t.Errorf("[admin] of the example: %+v\ndefaults: %+v", cfg.Admin, def.Admin)
	}
}

// TestExampleDocumentsEveryKnob walks the schema and checks that every key
// appears in config.toml.example, so a new knob cannot ship undocumented.
func TestExampleDocumentsEveryKnob(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config.toml.example"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, k := range schemaKeys() {
		leaf := k.Path[strings.LastIndex(k.Path, ".")+1:]
		if k.Table && !strings.Contains(text, "["+k.Path+"]") ||
			!k.Table && !regexp.MustCompile(`(?m)^#? ?`+leaf+` = `).MatchString(text) {
			t.Errorf("config.toml.example does not document %q", k.Path)
		}
	}
}

// TestDefaultTableSizeIsMaglevs: the configuration's default table size is
// the Maglev paper's, which the hashing reports and benchmarks measure.
func TestDefaultTableSizeIsMaglevs(t *testing.T) {
	if DefaultTableSize != hashing.DefaultMaglevSize {
		t.Errorf("DefaultTableSize %d, hashing.DefaultMaglevSize %d", DefaultTableSize, hashing.DefaultMaglevSize)
	}
}

// TestExampleDocumentsDefaults checks every default config.toml.example
// states for a key (in the comment on its line, or in the comment block
// right above it: `default "30s"`, `Default 64`, `"tcp" (default)`) against
// the loader: a minimal file with the key set to that value must load to
// exactly what it loads to without the key.
func TestExampleDocumentsDefaults(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config.toml.example"))
	if err != nil {
		t.Fatal(err)
	}
	const (
		dataplane = "[dataplane]\ningress = \"eth0\"\n"
		vipNoPort = dataplane + "[[vip]]\nname = \"a\"\naddress = \"198.18.0.100\"\n"
		vip       = vipNoPort + "port = 80\n"
		backend   = "[[vip.backend]]\naddress = \"198.18.1.11\"\n"
	)
	// around returns the minimal file for key of a section, with line
	// ("" for none) in place.
	around := map[string]func(key, l string) string{
		"[dataplane]": func(_, l string) string { return dataplane + l + "\n" },
		"[conntrack]": func(_, l string) string { return dataplane + "[conntrack]\n" + l + "\n" },
		"[admin]":     func(_, l string) string { return dataplane + "[admin]\n" + l + "\n" },
		"[[vip]]": func(key, l string) string {
			if key == "port" {
				// A VIP on every port needs a port to probe.
				return vipNoPort + l + "\n[vip.healthcheck]\nport = 80\n" + backend
			}
			return vip + l + "\n" + backend
		},
		"[vip.healthcheck]": func(_, l string) string { return vip + "[vip.healthcheck]\n" + l + "\n" + backend },
		"[[vip.backend]]":   func(_, l string) string { return vip + backend + l + "\n" },
	}
	keyRE := regexp.MustCompile(`^([a-z_]+) = [^#]*(#.*)?$`)
	defRE := regexp.MustCompile(`[Dd]efault:? ("[^"]*"|-?[0-9]+)|("[^"]*"|-?[0-9]+) \(default`)
	section, done := "", map[string]bool{}
	var block []string // the comment lines right above the current line
	checked := 0
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "["):
			section, block = line, nil
			continue
		case strings.HasPrefix(line, "#"):
			block = append(block, line)
			continue
		}
		m := keyRE.FindStringSubmatch(line)
		comments := append([]string{m2(m)}, block...)
		block = nil
		if m == nil || around[section] == nil || done[section+m[1]] {
			continue
		}
		done[section+m[1]] = true
		var def string
		for _, c := range comments {
			if d := defRE.FindStringSubmatch(c); d != nil {
				def = d[1] + d[2]
				break
			}
		}
		if def == "" {
			continue // required, or no stated default
		}
		checked++
		file := around[section]
		with, _, err := Parse("with.toml", []byte(file(m[1], m[1]+" = "+def)))
		if err != nil {
			t.Errorf("%s %s: the documented default %s does not load: %v", section, m[1], def, err)
			continue
		}
		without, _, err := Parse("without.toml", []byte(file(m[1], "")))
		if err != nil {
			t.Fatalf("%s: minimal file does not load: %v", section, err)
		}
		if !reflect.DeepEqual(with, without) {
			t.Errorf("%s %s: config.toml.example says the default is %s, the loader disagrees", section, m[1], def)
		}
	}
	if checked < 30 {
		t.Errorf("checked only %d documented defaults; has the example's wording changed?", checked)
	}
}

// m2 returns the trailing comment of a key line match, or "".
func m2(m []string) string {
	if m == nil {
		return ""
	}
	return m[2]
}
