// Package sdunit reads systemd unit files (systemd.syntax(7)) far enough
// to answer what the packaging tests and the test bed ask of vipd's
// shipped unit: which directories systemd removes when the unit stops
// (systemd.exec(5)). It reads one file as written: drop-ins, templates
// and specifiers are not expanded, and a value that holds a specifier is
// refused rather than guessed at.
package sdunit

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
)

// Unit is a parsed unit file: its sections, each a key's assignments in
// the order the file makes them.
type Unit struct {
	sections map[string]map[string][]string
}

// Parse reads a unit file: [Section] headers, Key=Value assignments
// (whitespace around the "=" is dropped), comment lines starting with "#"
// or ";", and lines continued by a trailing backslash (which becomes a
// space).
func Parse(r io.Reader) (*Unit, error) {
	u := &Unit{sections: map[string]map[string][]string{}}
	var section, cont string
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if cont != "" && (strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";")) {
			continue // a comment inside a continued assignment
		}
		line = cont + line
		if rest, ok := strings.CutSuffix(line, `\`); ok {
			cont = rest + " "
			continue
		}
		cont = ""
		switch {
		case line == "", strings.HasPrefix(line, "#"), strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			if !strings.HasSuffix(line, "]") {
				return nil, fmt.Errorf("line %d: section header %q has no closing ]", n, line)
			}
			section = line[1 : len(line)-1]
			if u.sections[section] == nil {
				u.sections[section] = map[string][]string{}
			}
		default:
			key, value, ok := strings.Cut(line, "=")
			if !ok {
				return nil, fmt.Errorf("line %d: %q is no assignment", n, line)
			}
			if section == "" {
				return nil, fmt.Errorf("line %d: assignment before the first section", n)
			}
			key = strings.TrimSpace(key)
			u.sections[section][key] = append(u.sections[section][key], strings.TrimSpace(value))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cont != "" {
		return nil, fmt.Errorf("line %d: the file ends inside a continued line", n)
	}
	return u, nil
}

// List is a list setting's value: the space-separated words of its
// assignments after the last empty one (which resets the list).
func (u *Unit) List(section, key string) []string {
	var words []string
	for _, v := range u.sections[section][key] {
		if v == "" {
			words = nil
			continue
		}
		words = append(words, strings.Fields(v)...)
	}
	return words
}

// Value is a single-valued setting: its last assignment, "" when none.
func (u *Unit) Value(section, key string) string {
	vs := u.sections[section][key]
	if len(vs) == 0 {
		return ""
	}
	return vs[len(vs)-1]
}

// Bool is a boolean setting as systemd reads one; false when unset.
func (u *Unit) Bool(section, key string) (bool, error) {
	switch v := strings.ToLower(u.Value(section, key)); v {
	case "", "0", "no", "n", "false", "f", "off":
		return false, nil
	case "1", "yes", "y", "true", "t", "on":
		return true, nil
	default:
		return false, fmt.Errorf("[%s] %s=%s is no boolean", section, key, v)
	}
}

// RemovedOnStop lists, sorted, the directories whose contents systemd
// throws away whenever the service stops (systemd.exec(5)), as a system
// service sees them:
//
//   - each RuntimeDirectory= under /run (and the symlinks of its
//     "dir:link" form), unless RuntimeDirectoryPreserve=yes. The value
//     "restart" keeps them across `systemctl restart` and Restart=, but a
//     stop and a start (what many upgrades do) still removes them;
//   - /tmp and /var/tmp with PrivateTmp= (implied by DynamicUser=);
//   - /dev/shm and /dev/mqueue with RemoveIPC= (implied by DynamicUser=),
//     which removes the POSIX shared memory and message queues of the
//     unit's User= or Group=;
//   - each TemporaryFileSystem= path, a tmpfs that lives as long as the
//     unit's mount namespace.
//
// StateDirectory=, CacheDirectory=, LogsDirectory= and
// ConfigurationDirectory= survive a stop.
func (u *Unit) RemovedOnStop() ([]string, error) {
	const s = "Service"
	var dirs []string
	add := func(setting, base, p string) error {
		if strings.Contains(p, "%") {
			return fmt.Errorf("%s=%s: specifiers are not expanded here", setting, p)
		}
		if base != "" && (path.IsAbs(p) || strings.HasPrefix(path.Clean(p), "..")) {
			return fmt.Errorf("%s=%s: want a path relative to %s", setting, p, base)
		}
		dirs = append(dirs, path.Join("/", base, p))
		return nil
	}
	bools := map[string]bool{}
	for _, key := range []string{"DynamicUser", "PrivateTmp", "RemoveIPC"} {
		b, err := u.Bool(s, key)
		if key == "PrivateTmp" && u.Value(s, key) == "disconnected" {
			b, err = true, nil // systemd 257: a private tmpfs, not shared with JoinsNamespaceOf=
		}
		if err != nil {
			return nil, err
		}
		bools[key] = b
	}
	preserve := strings.ToLower(u.Value(s, "RuntimeDirectoryPreserve"))
	switch preserve {
	case "", "restart", "0", "no", "n", "false", "f", "off":
		for _, w := range u.List(s, "RuntimeDirectory") {
			dir, link, hasLink := strings.Cut(w, ":")
			if err := add("RuntimeDirectory", "run", dir); err != nil {
				return nil, err
			}
			if hasLink {
				if err := add("RuntimeDirectory", "run", link); err != nil {
					return nil, err
				}
			}
		}
	case "1", "yes", "y", "true", "t", "on":
	default:
		return nil, fmt.Errorf("RuntimeDirectoryPreserve=%s: want a boolean or restart", preserve)
	}
	if bools["PrivateTmp"] || bools["DynamicUser"] {
		dirs = append(dirs, "/tmp", "/var/tmp")
	}
	if (bools["RemoveIPC"] || bools["DynamicUser"]) && (bools["DynamicUser"] || u.Value(s, "User") != "" || u.Value(s, "Group") != "") {
		dirs = append(dirs, "/dev/mqueue", "/dev/shm")
	}
	for _, w := range u.List(s, "TemporaryFileSystem") {
		p, _, _ := strings.Cut(w, ":")
		if !path.IsAbs(p) {
			return nil, fmt.Errorf("TemporaryFileSystem=%s: want an absolute path", w)
		}
		if err := add("TemporaryFileSystem", "", p); err != nil {
			return nil, err
		}
	}
	slices.Sort(dirs)
	return slices.Compact(dirs), nil
}

// Within says whether p is dir or lies below it (both absolute; compared
// as cleaned paths, without following symlinks).
func Within(p, dir string) bool {
	p, dir = path.Clean(p), path.Clean(dir)
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
