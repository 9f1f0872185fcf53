package packaging

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// shippedPages returns the man pages the package ships, as name(section):
// the pages under deb/ and vipd.toml(5), which mkdeb generates.
func shippedPages(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob("deb/*.[1-9]")
	if err != nil || len(files) == 0 {
		t.Fatalf("no man pages under deb/ (%v)", err)
	}
	pages := map[string]bool{"vipd.toml(5)": true}
	for _, f := range files {
		ext := filepath.Ext(f)
		pages[strings.TrimSuffix(filepath.Base(f), ext)+"("+ext[1:]+")"] = true
	}
	return pages
}

// unitKey returns the values of key in a unit file's text, in order.
func unitKey(text, key string) []string {
	var vals []string
	for line := range strings.Lines(text) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), key+"="); ok {
			vals = append(vals, v)
		}
	}
	return vals
}

// TestUnitDocumentation: each unit's Documentation= starts with the man
// page of the program it runs (systemctl status and help show the first
// one), and names only pages the package ships and documents under
// /usr/share/doc/vipd/ that exist.
func TestUnitDocumentation(t *testing.T) {
	pages := shippedPages(t)
	units, err := filepath.Glob("deb/*.service")
	if err != nil || len(units) < 2 {
		t.Fatalf("units under deb/: %v (%v)", units, err)
	}
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		exec := unitKey(text, "ExecStart")
		if len(exec) != 1 {
			t.Errorf("%s: ExecStart= %q, want one", u, exec)
			continue
		}
		prog := filepath.Base(strings.Fields(exec[0])[0])
		var docs []string
		for _, v := range unitKey(text, "Documentation") {
			docs = append(docs, strings.Fields(v)...)
		}
		if want := "man:" + prog + "(8)"; len(docs) == 0 || docs[0] != want {
			t.Errorf("%s runs %s, but its Documentation= begins with %v, not %s", u, prog, docs, want)
		}
		for _, d := range docs {
			switch {
			case strings.HasPrefix(d, "man:"):
				if p := strings.TrimPrefix(d, "man:"); !pages[p] && strings.HasPrefix(p, "vipd") {
					t.Errorf("%s: Documentation=%s: the package ships no such page (it has %v)", u, d, pages)
				}
			case strings.HasPrefix(d, "file:/usr/share/doc/vipd/"):
				name := strings.TrimPrefix(d, "file:/usr/share/doc/vipd/")
				src := filepath.Join("..", "docs", name)
				if name == "README.md" {
					src = filepath.Join("..", name)
				}
				if _, err := os.Stat(src); err != nil {
					t.Errorf("%s: Documentation=%s: mkdeb installs no such file (%v)", u, d, err)
				}
			default:
				t.Errorf("%s: Documentation=%s is neither a man page nor a file of the package", u, d)
			}
		}
	}
}
