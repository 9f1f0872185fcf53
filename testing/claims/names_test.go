package claims

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// nameRE matches a test, benchmark or fuzz target's name as prose writes
// it; a subtest path (BenchmarkHit/nat4) matches its top-level name.
var nameRE = regexp.MustCompile(`\b(?:Test|Benchmark|Fuzz)[A-Z0-9_][A-Za-z0-9_]*`)

// root is the module's root: the nearest parent holding go.mod.
func root(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = up
	}
}

// skipDir says which directories hold no claims of the project's own:
// version control, build output, and the measurement logs under
// bench/results (each names the benchmarks of the commit it was taken
// at, a record rather than a claim about today's tree).
func skipDir(rel string) bool {
	switch rel {
	case ".git", "bin", filepath.Join("bench", "results"):
		return true
	}
	return false
}

// docFile says whether a file is prose or a script whose text may name a
// test: the Markdown documents, the man pages, the Makefile and the shell
// scripts (a -run or -bench pattern names one).
func docFile(name string) bool {
	switch filepath.Ext(name) {
	case ".md", ".8", ".5", ".sh":
		return true
	}
	return name == "Makefile" || name == "run"
}

// TestNamedTestsExist fails for each test, benchmark or fuzz target named
// in a Go comment or string (a -run pattern), a Markdown document, the
// Makefile or a script that no Go file of the module declares.
func TestNamedTestsExist(t *testing.T) {
	top := root(t)
	declared := map[string]bool{}
	type ref struct {
		name, where string
	}
	var refs []ref
	note := func(text, file string, line int) {
		for _, m := range nameRE.FindAllStringIndex(text, -1) {
			l := line + strings.Count(text[:m[0]], "\n")
			refs = append(refs, ref{text[m[0]:m[1]], file + ":" + itoa(l)})
		}
	}
	fset := token.NewFileSet()
	err := filepath.WalkDir(top, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(top, path)
		if e.IsDir() {
			if rel != "." && (skipDir(rel) || strings.HasPrefix(e.Name(), ".") && e.Name() != ".ci" && e.Name() != ".githooks") {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(path, ".go"):
			f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					declared[d.Name.Name] = true
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							declared[s.Name.Name] = true
						case *ast.ValueSpec:
							for _, n := range s.Names {
								declared[n.Name] = true
							}
						}
					}
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if l, ok := n.(*ast.BasicLit); ok && l.Kind == token.STRING {
					note(l.Value, rel, fset.Position(l.Pos()).Line)
				}
				return true
			})
			for _, cg := range f.Comments {
				for _, c := range cg.List {
					note(c.Text, rel, fset.Position(c.Slash).Line)
				}
			}
		case docFile(e.Name()):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			note(string(b), rel, 1)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(declared) < 100 {
		t.Fatalf("found only %d declarations under %s: the walk is broken", len(declared), top)
	}
	missing := map[string][]string{}
	for _, r := range refs {
		if !declared[r.name] {
			missing[r.name] = append(missing[r.name], r.where)
		}
	}
	names := make([]string, 0, len(missing))
	for n := range missing {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t.Errorf("%s is named but no Go file declares it: %s", n, strings.Join(missing[n], ", "))
	}
	t.Logf("%d references checked", len(refs))
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}
