package vipd

import (
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is the import path of this module's root.
const module = "github.com/vipd/vipd"

// A rule forbids the packages matching From to reach, through any chain
// of imports (their own and their dependencies', tests excluded), a
// package matching Deny. A pattern is an import path relative to the
// module; "std:" marks one of the standard library's, and a first
// element with a dot a third party's; "p/..." matches p and every
// package below it.
type rule struct {
	Name string
	Why  string
	From []string
	Deny []string
	// Only, when set, is the stronger form: outside the standard library
	// the packages matching From may reach nothing but these.
	Only []string
}

// rules are the layers of docs/architecture.md, "The tree by layer", as
// the build enforces them. A new import that breaks one fails make test
// with the rule's name and the chain of imports that breaks it.
var rules = []rule{
	{
		Name: "the data plane is below configuration",
		Why:  "workers take a dataplane.Spec; parsing, serving and deciding belong to the control plane, and the packet path must not link the TOML or HTTP stacks",
		From: []string{"dataplane/...", "packet", "hashing", "conntrack", "nat", "dsr", "arp"},
		Deny: []string{"control/...", "health/...", "testing/...", "github.com/BurntSushi/toml/...", "std:net/http", "github.com/prometheus/...", "github.com/osrg/gobgp/...", "go.etcd.io/..."},
	},
	{
		Name: "leaves do not import the data plane",
		Why:  "the per-packet transforms and tables are the pipeline's parts; one that imported the pipeline would make a cycle of layers",
		From: []string{"packet", "hashing", "conntrack", "nat", "dsr", "dataplane/icmperr", "dataplane/ipfrag", "dataplane/quiclb"},
		Deny: []string{"dataplane", "dataplane/afxdp", "dataplane/afpacket", "dataplane/memq", "dataplane/xdpprog"},
	},
	{
		Name: "what runs does not import test kits",
		Why:  "the daemons and the host helpers ship; test kits, the testing package and quic-go (a test and backend-side dependency) must not ship with them",
		From: []string{"cmd/vipd", "cmd/vipd-decap", "internal/..."},
		Deny: []string{"testing/...", "std:testing", "github.com/quic-go/..."},
	},
	{
		Name: "what runs does not link an etcd server",
		Why:  "vipd is etcd's client (go.etcd.io/etcd/client/v3); the server, whose embed package testing/etcdtest runs, is for tests only and would ship raft, bbolt and a gRPC gateway inside the daemons",
		From: []string{"cmd/vipd", "cmd/vipd-decap", "internal/..."},
		Deny: []string{"go.etcd.io/etcd/server/...", "go.etcd.io/raft/...", "go.etcd.io/bbolt/..."},
	},
	{
		Name: "the admin API's wire types know nothing of packets",
		Why:  "api and client are what a command, the test bed or a monitoring script links to talk to vipd; they must not drag the engine in (the server converts the data plane's types to them)",
		From: []string{"control/admin/api", "control/admin/client"},
		Only: []string{"control/admin/api", "control/admin/client"},
	},
	{
		Name: "host helpers are below everything they help",
		Why:  "internal/ holds small helpers over the kernel and the runtime that any layer may use",
		From: []string{"internal/..."},
		Deny: []string{"dataplane/...", "control/...", "health/...", "arp", "dsr/...", "testing/..."},
	},
	{
		Name: "the backends' agent is not the balancer",
		Why:  "vipd-decap runs on the backends: it shares the encapsulations (dsr) and nothing of the balancer's",
		From: []string{"dsr/decap/...", "cmd/vipd-decap"},
		Deny: []string{"dataplane/...", "control/...", "health/...", "conntrack", "arp", "hashing"},
	},
}

// graph is each package's imports, for every package below the module and
// everything they depend on; std marks the standard library's.
type graph struct {
	imports map[string][]string
	std     map[string]bool
}

// loadGraph runs go list over the module.
func loadGraph(t *testing.T) graph {
	t.Helper()
	// -e: a cycle, which a forbidden import can make, is reported in
	// the package's Error, and the graph is still listed.
	cmd := exec.Command("go", "list", "-e", "-deps", "-json=ImportPath,Imports,Standard", "./...")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	g := graph{imports: map[string][]string{}, std: map[string]bool{}}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Imports    []string
			Standard   bool
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		// A package built for another with its profile (cmd/vipd's
		// default.pgo) is listed again as "path [that package]", with
		// the same imports: one package for the rules.
		path := variant(p.ImportPath)
		if _, seen := g.imports[path]; seen {
			continue
		}
		imps := make([]string, len(p.Imports))
		for i, imp := range p.Imports {
			imps[i] = variant(imp)
		}
		g.imports[path] = imps
		g.std[path] = p.Standard
	}
	g.std["C"] = true // cgo's pseudo-package, which go list does not list
	if len(g.imports) < 50 {
		t.Fatalf("go list gave %d packages", len(g.imports))
	}
	return g
}

// variant strips the " [for]" suffix of a package built for another.
func variant(path string) string {
	p, _, _ := strings.Cut(path, " [")
	return p
}

// expand turns a pattern relative to the module into an absolute one.
func expand(pat string) string {
	if std, ok := strings.CutPrefix(pat, "std:"); ok {
		return std
	}
	if first, _, _ := strings.Cut(pat, "/"); strings.Contains(first, ".") {
		return pat
	}
	return module + "/" + pat
}

func expandAll(pats []string) []string {
	e := make([]string, len(pats))
	for i, p := range pats {
		e[i] = expand(p)
	}
	return e
}

// matches reports whether import path p matches pattern pat (expanded).
func matches(pat, p string) bool {
	if base, ok := strings.CutSuffix(pat, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == pat
}

func matchesAny(pats []string, p string) bool {
	return slices.ContainsFunc(pats, func(pat string) bool { return matches(pat, p) })
}

// violations returns, for each package matching r.From, the first chain
// of imports (breadth first, so a shortest one) from it to a package
// matching r.Deny or, with r.Only, to a package outside the standard
// library that does not match r.Only.
func violations(g graph, r rule) [][]string {
	from, deny, only := expandAll(r.From), expandAll(r.Deny), expandAll(r.Only)
	bad := func(p string) bool {
		return matchesAny(deny, p) || len(only) > 0 && !g.std[p] && !matchesAny(only, p)
	}
	var found [][]string
	var roots []string
	for p := range g.imports {
		if matchesAny(from, p) {
			roots = append(roots, p)
		}
	}
	slices.Sort(roots)
	for _, root := range roots {
		prev := map[string]string{root: ""}
		queue := []string{root}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			if p != root && bad(p) {
				var chain []string
				for q := p; q != ""; q = prev[q] {
					chain = append(chain, q)
				}
				slices.Reverse(chain)
				found = append(found, chain)
				break
			}
			imps := slices.Clone(g.imports[p])
			slices.Sort(imps)
			for _, q := range imps {
				if _, seen := prev[q]; !seen {
					prev[q] = p
					queue = append(queue, q)
				}
			}
		}
	}
	return found
}

// short strips the module's path from an import chain, for messages.
func short(chain []string) string {
	s := make([]string, len(chain))
	for i, p := range chain {
		s[i] = strings.TrimPrefix(p, module+"/")
	}
	return strings.Join(s, " → ")
}

// TestLayers checks every rule over the module's real import graph. Each
// rule's From and module-local Deny patterns must name packages that
// exist, so that a move cannot make a rule hold by matching nothing.
func TestLayers(t *testing.T) {
	g := loadGraph(t)
	for _, r := range rules {
		for _, pats := range [][]string{r.From, r.Deny, r.Only} {
			for _, pat := range pats {
				e := expand(pat)
				if !strings.HasPrefix(e, module) {
					continue
				}
				if !g.has(e) {
					t.Errorf("rule %q names %s, which matches no package: update the rule with the tree", r.Name, pat)
				}
			}
		}
		for _, chain := range violations(g, r) {
			t.Errorf("layer rule %q broken: %s\n\twhy the rule: %s", r.Name, short(chain), r.Why)
		}
	}
}

// has reports whether some package of g matches pattern pat (expanded).
func (g graph) has(pat string) bool {
	for p := range g.imports {
		if matches(pat, p) {
			return true
		}
	}
	return false
}

// TestViolations: the checker finds a forbidden package however deep, by
// a shortest chain, and only from the packages a rule names.
func TestViolations(t *testing.T) {
	g := graph{imports: map[string][]string{
		module + "/dataplane":         {module + "/conntrack", "fmt"},
		module + "/conntrack":         {module + "/internal/x"},
		module + "/internal/x":        {module + "/control/config"},
		module + "/control/config":    {"github.com/BurntSushi/toml"},
		module + "/control/daemon":    {module + "/control/config"},
		module + "/control/admin/api": {"fmt", "encoding/json"},
		"github.com/BurntSushi/toml":  {"fmt"},
		"fmt":                         nil,
		"encoding/json":               nil,
	}, std: map[string]bool{"fmt": true, "encoding/json": true}}
	r := rule{Name: "test", From: []string{"dataplane/..."}, Deny: []string{"control/...", "github.com/BurntSushi/toml/..."}}
	got := violations(g, r)
	want := "dataplane → conntrack → internal/x → control/config"
	if len(got) != 1 || short(got[0]) != want {
		t.Errorf("violations %q, want one: %s", got, want)
	}
	r.From = []string{"hashing"}
	if got := violations(g, r); len(got) != 0 {
		t.Errorf("a rule from a package not in the graph found %q", got)
	}
	r.From, r.Deny = []string{"control/daemon"}, []string{"github.com/BurntSushi/toml/..."}
	if got := violations(g, r); len(got) != 1 || short(got[0]) != "control/daemon → control/config → github.com/BurntSushi/toml" {
		t.Errorf("violations %q", got)
	}
	r = rule{Name: "only", From: []string{"control/admin/api"}, Only: []string{"control/admin/api"}}
	if got := violations(g, r); len(got) != 0 {
		t.Errorf("the standard library broke an Only rule: %q", got)
	}
	g.imports[module+"/control/admin/api"] = append(g.imports[module+"/control/admin/api"], module+"/conntrack")
	if got := violations(g, r); len(got) != 1 || short(got[0]) != "control/admin/api → conntrack" {
		t.Errorf("Only rule: violations %q", got)
	}
}
