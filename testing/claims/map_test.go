package claims

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// mapDirRE matches a directory as the map names it: lower-case path
// elements, ending in a slash.
var mapDirRE = regexp.MustCompile(`^[a-z0-9][a-z0-9/-]*/$`)

// layerParents are the top-level directories that group packages by
// layer: every directory right below one of them must be on the map.
var layerParents = []string{"control", "health", "dataplane", "dsr", "internal", "testing"}

// TestArchitectureMap: the map of the tree that opens
// docs/architecture.md ("The tree by layer") names only directories that
// exist, and names every top-level directory and every directory right
// below the layers' parents, so that it cannot drift from the tree. In
// the map, a line that starts in the first column names directories
// from the top; an indented line names them below the one directory of
// the last line that started in the first column.
func TestArchitectureMap(t *testing.T) {
	top := root(t)
	data, err := os.ReadFile(filepath.Join(top, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(data), "## The tree by layer\n")
	if !ok {
		t.Fatal(`docs/architecture.md has no "## The tree by layer"`)
	}
	_, block, ok := strings.Cut(after, "```\n")
	block, _, ok2 := strings.Cut(block, "```\n")
	if !ok || !ok2 {
		t.Fatal("no code block under \"The tree by layer\"")
	}
	named := map[string]bool{}
	parent := ""
	for i, line := range strings.Split(block, "\n") {
		var dirs []string
		for _, f := range strings.Fields(line) {
			if !mapDirRE.MatchString(f) {
				break // the description
			}
			dirs = append(dirs, strings.TrimSuffix(f, "/"))
		}
		if len(dirs) == 0 {
			continue
		}
		indented := strings.HasPrefix(line, " ")
		if indented && parent == "" {
			t.Errorf("map line %d: %q is indented under no single directory", i+1, line)
			continue
		}
		for _, d := range dirs {
			if indented {
				d = parent + "/" + d
			}
			named[d] = true
			if fi, err := os.Stat(filepath.Join(top, d)); err != nil || !fi.IsDir() {
				t.Errorf("map line %d names %s/, which is not a directory", i+1, d)
			}
		}
		if !indented {
			parent = ""
			if len(dirs) == 1 {
				parent = dirs[0]
			}
		}
	}
	covered := func(dir string) bool {
		for d := range named {
			if d == dir || strings.HasPrefix(d, dir+"/") {
				return true
			}
		}
		return false
	}
	out, err := exec.Command("git", "-C", top, "ls-files").Output()
	if err != nil {
		t.Skipf("git ls-files: %v", err)
	}
	want := map[string]bool{}
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		parts := strings.Split(f, "/")
		if len(parts) < 2 || strings.HasPrefix(parts[0], ".") {
			continue
		}
		want[parts[0]] = true
		for _, p := range layerParents {
			if parts[0] == p && len(parts) > 2 && parts[1] != "testdata" {
				want[p+"/"+parts[1]] = true
			}
		}
	}
	if len(want) < 10 {
		t.Fatalf("git ls-files gave %d directories", len(want))
	}
	for d := range want {
		if !covered(d) {
			t.Errorf("%s/ is not on the map of docs/architecture.md, \"The tree by layer\"", d)
		}
	}
}
