package config

// The fleet's shared configuration: the document the etcd key
// <prefix>config holds, flow_hash_seed and every [[vip]] written exactly
// as a local file writes them. It is decoded by the file's decoder and
// validated by the file's validation, together with the box's own
// settings, so a revision a box accepts is one it can run.

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
)

// Shared is the fleet's shared document.
type Shared struct {
	// FlowHashSeed is every box's [dataplane] flow_hash_seed; default
	// DefaultFlowHashSeed, as in a local file.
	FlowHashSeed uint64 `toml:"flow_hash_seed"`
	VIPs         []VIP  `toml:"vip"`
}

// WithShared returns the complete configuration of a box whose local
// file (local, from Load or Parse, with [fleet]) is joined by the fleet's
// shared document: the box's settings, and the shared seed and VIPs.
// name is what messages say instead of a file name ("etcd
// /vipd/fleets/edge1/config@rev 42"). The document is checked as a file
// is, VIP by VIP and across VIPs and against the box (its [bgp], its
// egress_mtu); a problem of the box's own settings that only the shared
// VIPs reveal names the local file. On failure the error is an *Errors,
// as Parse's.
func WithShared(local *Config, name string, shared []byte) (*Config, []Problem, error) {
	if local.Fleet == nil {
		return nil, nil, fmt.Errorf("config: WithShared needs a configuration with [fleet]")
	}
	return parseShared(local, name, local.Fleet.dir, shared)
}

// ParseShared checks a shared document on its own, for `vipd fleet push`:
// against box (a local configuration: its [bgp] decides whether VIPs are
// announced by default, as on the fleet's boxes) or, when box is nil,
// against SharedBox. A relative key_file (QUIC-LB) is taken from name's
// directory.
func ParseShared(name string, data []byte, box *Config) (*Config, []Problem, error) {
	if box == nil {
		box = SharedBox()
	}
	return parseShared(box, name, filepath.Dir(name), data)
}

// LoadShared is ParseShared for the file at path.
func LoadShared(path string, box *Config) (*Config, []Problem, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return ParseShared(path, data, box)
}

// SharedBox is the minimal box a shared document is checked against when
// no local configuration is at hand: the defaults, an ingress interface,
// no [bgp] (so a VIP written announce = true needs a box with one).
func SharedBox() *Config {
	cfg := Default()
	cfg.Dataplane.Ingress = "eth0"
	cfg.Fleet = &Fleet{}
	return &cfg
}

func parseShared(local *Config, name, dir string, data []byte) (*Config, []Problem, error) {
	c := &collector{file: name, lines: indexLines(string(data)), dir: dir, shared: true}
	raw, err := decodeTOML(name, data)
	if err != nil {
		return nil, nil, err
	}
	// A table of the box's own has a message of its own, rather than
	// the decoder's "unknown key".
	for k := range tomlFields(reflect.TypeOf(Config{})) {
		if _, ok := raw[k]; ok && k != "vip" {
			c.errorf(k, "[%s] belongs in each box's local file, not in the fleet's shared configuration (which holds flow_hash_seed and [[vip]] only)", k)
			delete(raw, k)
		}
	}
	sh := Shared{FlowHashSeed: DefaultFlowHashSeed}
	c.decode("", raw, reflect.ValueOf(&sh).Elem())
	nerr, nwarn := len(c.errs), len(c.warns)

	cfg := boxCopy(local)
	cfg.Dataplane.FlowHashSeed = sh.FlowHashSeed
	cfg.VIPs = sh.VIPs
	c.validate(&cfg)
	c.placeLocal(local.Fleet, c.errs[nerr:], c.warns[nwarn:])
	c.warns = slices.DeleteFunc(c.warns, boxWarnings(local, dir))
	sortProblems(c.errs)
	sortProblems(c.warns)
	if len(c.errs) > 0 {
		return nil, c.warns, &Errors{Problems: c.errs}
	}
	return &cfg, c.warns, nil
}

// boxCopy returns a copy of the box's settings of local that validation
// can fill in without touching local, and without VIPs.
func boxCopy(local *Config) Config {
	cfg := *local
	if local.BGP != nil {
		b := *local.BGP
		b.Peers = slices.Clone(b.Peers)
		cfg.BGP = &b
	}
	cfg.Admin.AllowedHosts = slices.Clone(local.Admin.AllowedHosts)
	cfg.VIPs = nil
	return cfg
}

// boxWarnings returns a test for the warnings the box's settings give
// alone: the local file's own, which its loading reported already and a
// shared document does not repeat.
func boxWarnings(local *Config, dir string) func(Problem) bool {
	c := &collector{dir: dir, shared: true}
	if f := local.Fleet; f != nil {
		c.file, c.lines = f.file, f.lines
	}
	cfg := boxCopy(local)
	c.validate(&cfg)
	seen := map[Problem]bool{}
	for _, w := range c.warns {
		seen[w] = true
	}
	return func(p Problem) bool { return seen[p] }
}

// placeLocal points the problems validation found about the box's own
// settings (every key but the shared document's) at the local file,
// where they are written.
func (c *collector) placeLocal(f *Fleet, errs, warns []Problem) {
	if f == nil || f.file == "" {
		return
	}
	for _, ps := range [][]Problem{errs, warns} {
		for i := range ps {
			k := ps[i].Key
			if k == "vip" || strings.HasPrefix(k, "vip.") || strings.HasPrefix(k, "vip[") || k == "flow_hash_seed" {
				continue
			}
			ps[i].File, ps[i].Line = f.file, f.lines.lineOf(k)
		}
	}
}
