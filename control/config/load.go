package config

import (
	"errors"
	"os"
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
	c := &collector{file: name, lines: indexLines(string(data))}
	var raw map[string]any
	if _, err := toml.Decode(string(data), &raw); err != nil {
		// A syntax error: the decoder stops at the first one, and nothing
		// after it can be trusted, so it is reported alone.
		p := Problem{File: name, Msg: err.Error()}
		var pe toml.ParseError
		if errors.As(err, &pe) {
			p.Line, p.Key, p.Msg = pe.Position.Line, pe.LastKey, pe.Message
		}
		return nil, nil, &Errors{Problems: []Problem{p}}
	}
	cfg := Default()
	c.decode("", raw, reflect.ValueOf(&cfg).Elem())
	c.validate(&cfg)
	sortProblems(c.errs)
	sortProblems(c.warns)
	if len(c.errs) > 0 {
		return nil, c.warns, &Errors{Problems: c.errs}
	}
	return &cfg, c.warns, nil
}
