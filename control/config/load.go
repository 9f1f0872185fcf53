package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"

	"github.com/BurntSushi/toml"
)

// Load reads, decodes and validates the file at path. On success it returns
// the Config and the warnings about it (legal but questionable settings). On
// failure the error is an *Errors listing every problem found, each naming
// the file, the key path and, where known, the line.
func Load(path string) (*Config, []Problem, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return Parse(path, data)
}

// Parse is Load for a file already in memory; name is used in messages.
func Parse(name string, data []byte) (*Config, []Problem, error) {
	c := &collector{file: name, lines: indexLines(string(data)), dir: filepath.Dir(name)}
	raw, err := decodeTOML(name, data)
	if err != nil {
		return nil, nil, err
	}
	cfg := Default()
	c.decode("", raw, reflect.ValueOf(&cfg).Elem())
	c.checkFleetLocal(raw, &cfg)
	c.validate(&cfg)
	sortProblems(c.errs)
	sortProblems(c.warns)
	if len(c.errs) > 0 {
		return nil, c.warns, &Errors{Problems: c.errs}
	}
	return &cfg, c.warns, nil
}

// decodeTOML decodes data into a generic map. A syntax error stops the
// decoder at the first one, and nothing after it can be trusted, so it is
// reported alone, as an *Errors.
func decodeTOML(name string, data []byte) (map[string]any, error) {
	var raw map[string]any
	if _, err := toml.Decode(string(data), &raw); err != nil {
		p := Problem{File: name, Msg: err.Error()}
		var pe toml.ParseError
		if errors.As(err, &pe) {
			p.Line, p.Key, p.Msg = pe.Position.Line, pe.LastKey, pe.Message
		}
		return nil, &Errors{Problems: []Problem{p}}
	}
	return raw, nil
}
