package config

import (
	"fmt"
	"sort"
	"strings"
)

// Problem is one finding about a configuration file: an error that stops the
// file from loading, or a warning about a legal but questionable setting.
type Problem struct {
	File string // file name as given to Load
	Line int    // 1-based line of the key, 0 when unknown
	Key  string // key path, e.g. "vip[0].backend[2].weight"
	Msg  string
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
	}
	b.WriteString(": ")
	if p.Key != "" {
		b.WriteString(p.Key)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Errors is every error found in one file. Load returns it (as error) when
// the file is not usable; all problems are reported at once, sorted by line.
type Errors struct {
	Problems []Problem
}

func (e *Errors) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	if len(lines) == 1 {
		return lines[0]
	}
	return fmt.Sprintf("%d errors:\n  %s", len(lines), strings.Join(lines, "\n  "))
}

// collector accumulates problems while a file is decoded and validated.
type collector struct {
	file  string
	lines *lineIndex
	// dir is where a relative path of the document is taken from: the
	// directory of the file, or of the local file for the fleet's
	// shared document.
	dir string
	// shared: the document is the fleet's shared one (WithShared), and
	// the box's own settings were checked with the local file.
	shared bool
	errs   []Problem
	warns  []Problem
}

func (c *collector) problem(key, format string, args ...any) Problem {
	return Problem{File: c.file, Line: c.lines.lineOf(key), Key: key, Msg: fmt.Sprintf(format, args...)}
}

func (c *collector) errorf(key, format string, args ...any) {
	c.errs = append(c.errs, c.problem(key, format, args...))
}

func (c *collector) warnf(key, format string, args ...any) {
	c.warns = append(c.warns, c.problem(key, format, args...))
}

func sortProblems(ps []Problem) {
	sort.SliceStable(ps, func(i, j int) bool {
		// Problems without a line (file-wide) go last.
		li, lj := ps[i].Line, ps[j].Line
		if li == 0 {
			li = 1 << 30
		}
		if lj == 0 {
			lj = 1 << 30
		}
		return li < lj
	})
}
