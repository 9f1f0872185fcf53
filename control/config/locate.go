package config

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/BurntSushi/toml"
)

// AdminEndpoints is where a vipd running on a file serves its admin API,
// as the file says: all that a client command needs of the file.
type AdminEndpoints struct {
	Listen string // [admin] listen: the read-only TCP listener, "" when disabled
	Socket string // [admin] socket: the Unix socket, "" when disabled
	// Note is set when the [admin] table could not be read, so that the
	// defaults stand in for it: it says why, with the file and line.
	Note string
}

// LocateAdmin reads from the file at path only its [admin] listen and
// socket: where to reach the vipd that runs on it. Everything else is that
// vipd's to judge when it loads the file (a reload), which then reports
// every problem and counts the failure; a client that validated the file
// first would fail without reaching it, and nothing would be recorded.
//
// A file that parses as TOML gives its [admin] values as they are, the
// defaults for the keys it leaves out; no value is validated. A file with
// a syntax error is scanned by lines, and its [admin] table (the header
// to the next table header) and the admin keys before the first table
// are parsed alone, so that an error elsewhere does not matter. When the
// admin part itself does not parse, or a value is not a string, the
// defaults stand in and Note says why. The error is only for a file that
// cannot be read.
func LocateAdmin(path string) (AdminEndpoints, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return AdminEndpoints{}, err
	}
	return locateAdmin(path, string(data)), nil
}

// locateAdmin is LocateAdmin for the file's contents; name is its name in
// the note.
func locateAdmin(name, src string) AdminEndpoints {
	var raw map[string]any
	if _, err := toml.Decode(src, &raw); err != nil {
		frag, found := adminPart(src)
		if !found {
			return defaultEndpoints("")
		}
		raw = nil
		if _, err := toml.Decode(frag, &raw); err != nil {
			return defaultEndpoints(syntaxNote(name, err))
		}
	}
	ep, key, bad := adminOf(raw)
	if bad != "" {
		p := Problem{File: name, Line: indexLines(src).lineOf(key), Key: key, Msg: bad}
		return defaultEndpoints(p.String())
	}
	return ep
}

func defaultEndpoints(note string) AdminEndpoints {
	return AdminEndpoints{Listen: DefaultAdminListen, Socket: DefaultAdminSocket, Note: note}
}

// syntaxNote words a syntax error in the admin part of file name.
func syntaxNote(name string, err error) string {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return fmt.Sprintf("%s:%d: [admin] does not parse: %s", name, pe.Position.Line, pe.Message)
	}
	return fmt.Sprintf("%s: [admin] does not parse: %v", name, err)
}

// adminOf takes listen and socket from a decoded document; when they
// cannot be taken, bad says what is wrong with key.
func adminOf(raw map[string]any) (ep AdminEndpoints, key, bad string) {
	ep = defaultEndpoints("")
	v, ok := raw["admin"]
	if !ok {
		return ep, "", ""
	}
	tab, ok := v.(map[string]any)
	if !ok {
		return ep, "admin", "must be a table"
	}
	for _, k := range []struct {
		key string
		dst *string
	}{{"listen", &ep.Listen}, {"socket", &ep.Socket}} {
		x, ok := tab[k.key]
		if !ok {
			continue
		}
		s, ok := x.(string)
		if !ok {
			return ep, "admin." + k.key, fmt.Sprintf("must be a string, not %v", x)
		}
		*k.dst = s
	}
	return ep, "", ""
}

// adminPart returns src with every line blanked but those that set
// [admin]: its table, from the header to the next table header, and the
// keys under admin set before the first table (admin.socket = ...,
// admin = {...}). Blank lines keep the line numbers of the file. found
// tells whether there was any. A header that names admin counts even
// when it is broken ("[admin" without its bracket), so that its error
// shows when the part is parsed.
func adminPart(src string) (part string, found bool) {
	lines := strings.Split(src, "\n")
	keep := make([]bool, len(lines))
	root, in := true, false
	for n := 0; n < len(lines); n++ {
		text := strings.TrimSpace(lines[n])
		switch {
		case text == "" || text[0] == '#':
			continue
		case text[0] == '[':
			root, in = false, isAdminHeader(text)
			keep[n] = in
			found = found || in
			continue
		}
		eq := keyEnd(text)
		if eq < 0 {
			// Not a key: keep it inside [admin], where its error
			// is the part's own.
			keep[n] = in
			continue
		}
		end, closed := skipValue(lines, n, text[eq+1:])
		if !closed {
			// An array or string left open to the end of the file:
			// broken, and taken as one line, so that the tables
			// after it are still found.
			end = n
		}
		if in || root && splitKey(text[:eq])[0] == "admin" {
			for i := n; i <= end; i++ {
				keep[i] = true
			}
			found = true
		}
		n = end
	}
	for i := range lines {
		if !keep[i] {
			lines[i] = ""
		}
	}
	return strings.Join(lines, "\n"), found
}

// isAdminHeader reports whether the table header line text names admin
// or a table under it.
func isAdminHeader(text string) bool {
	name := strings.TrimLeft(text, "[")
	if i := strings.IndexAny(name, "]#"); i >= 0 {
		name = name[:i]
	}
	return splitKey(name)[0] == "admin"
}
