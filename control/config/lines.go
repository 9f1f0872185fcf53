package config

import (
	"strconv"
	"strings"
	"sync"
)

// lineIndex maps key paths as this package names them ("vip[1].backend[0].port")
// to the line where the file sets them. The TOML decoder does not expose key
// positions, so this is a small scanner that understands what positions need:
// table headers, arrays of tables, dotted and quoted keys, and values spanning
// lines (multi-line strings and arrays). It is only used to point at lines in
// messages: when it cannot place a key, lineOf falls back to the nearest
// enclosing table, then to 0 ("unknown").
//
// The index is built on the first lookup: a file without problems never
// needs it, and on a fleet's document of 100,000 backends it costs a
// third of a second.
type lineIndex struct {
	src  string
	once sync.Once
	line map[string]int
}

func indexLines(src string) *lineIndex { return &lineIndex{src: src} }

// build scans src.
func (ix *lineIndex) build() {
	src := ix.src
	ix.line = make(map[string]int)
	// count[p] is the number of [[p]] headers seen so far for the array
	// path p (whose parents carry their indices).
	count := make(map[string]int)
	// isArray tells, for a plain dotted header path like "vip", whether it
	// names an array of tables, so that "vip.backend" resolves to
	// "vip[k].backend".
	isArray := make(map[string]bool)
	current := ""
	lines := strings.Split(src, "\n")
	for n := 0; n < len(lines); n++ {
		text := strings.TrimSpace(lines[n])
		if text == "" || text[0] == '#' {
			continue
		}
		lineNo := n + 1
		if strings.HasPrefix(text, "[[") {
			end := strings.Index(text, "]]")
			if end < 0 {
				continue
			}
			segs := splitKey(text[2:end])
			parent := resolve(segs[:len(segs)-1], isArray, count)
			base := join(parent, segs[len(segs)-1])
			isArray[strings.Join(segs, ".")] = true
			idx := count[base]
			count[base] = idx + 1
			current = base + "[" + strconv.Itoa(idx) + "]"
			ix.set(base, lineNo)
			ix.set(current, lineNo)
			continue
		}
		if text[0] == '[' {
			end := strings.IndexByte(text, ']')
			if end < 0 {
				continue
			}
			current = resolve(splitKey(text[1:end]), isArray, count)
			ix.set(current, lineNo)
			continue
		}
		eq := keyEnd(text)
		if eq < 0 {
			continue
		}
		key := current
		for _, s := range splitKey(text[:eq]) {
			key = join(key, s)
			ix.set(key, lineNo)
		}
		// Skip continuation lines of a value that spans several lines so
		// that their content is not mistaken for keys.
		n, _ = skipValue(lines, n, text[eq+1:])
	}
	ix.src = ""
}

func (ix *lineIndex) set(key string, line int) {
	if _, ok := ix.line[key]; !ok {
		ix.line[key] = line
	}
}

// lineOf returns the line of key, or of its nearest enclosing table or key
// known to the index, or 0.
func (ix *lineIndex) lineOf(key string) int {
	if ix == nil {
		return 0
	}
	ix.once.Do(ix.build)
	for key != "" {
		if l, ok := ix.line[key]; ok {
			return l
		}
		i := strings.LastIndexAny(key, ".[")
		if i < 0 {
			return 0
		}
		key = key[:i]
	}
	return 0
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

// resolve turns the segments of a table header into an indexed path: every
// prefix that names an array of tables gets the index of its latest element.
func resolve(segs []string, isArray map[string]bool, count map[string]int) string {
	path := ""
	for i, s := range segs {
		path = join(path, s)
		if isArray[strings.Join(segs[:i+1], ".")] {
			path += "[" + strconv.Itoa(count[path]-1) + "]"
		}
	}
	return path
}

// splitKey splits a dotted TOML key into its parts, honouring quotes.
func splitKey(s string) []string {
	var parts []string
	var cur strings.Builder
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '.':
			parts = append(parts, strings.TrimSpace(cur.String()))
			cur.Reset()
		case c == ' ' || c == '\t':
		default:
			cur.WriteByte(c)
		}
	}
	return append(parts, strings.TrimSpace(cur.String()))
}

// keyEnd returns the index of the '=' that ends the key of a key/value line,
// or -1 when the line has none outside quotes.
func keyEnd(s string) int {
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '=':
			return i
		case c == '#':
			return -1
		}
	}
	return -1
}

// skipValue returns the index of the last line belonging to the value that
// starts on line n with the text rest (after '='), and whether the value
// ends there: false when an array or a multi-line string is still open at
// the end of the file.
func skipValue(lines []string, n int, rest string) (int, bool) {
	depth := 0
	var inMulti string // """ or ''' while inside a multi-line string
	text := rest
	for {
		for i := 0; i < len(text); i++ {
			if inMulti != "" {
				if strings.HasPrefix(text[i:], inMulti) {
					i += 2
					inMulti = ""
				}
				continue
			}
			switch c := text[i]; c {
			case '#':
				i = len(text)
			case '"', '\'':
				q := string([]byte{c, c, c})
				if strings.HasPrefix(text[i:], q) {
					inMulti = q
					i += 2
					continue
				}
				// Single-line string: skip to its closing quote.
				for i++; i < len(text) && text[i] != c; i++ {
					if c == '"' && text[i] == '\\' {
						i++
					}
				}
			case '[', '{':
				depth++
			case ']', '}':
				depth--
			}
		}
		if depth <= 0 && inMulti == "" {
			return n, true
		}
		if n+1 >= len(lines) {
			return n, false
		}
		n++
		text = lines[n]
	}
}
