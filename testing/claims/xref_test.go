package claims

import (
	"bytes"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"

	"github.com/vipd/vipd/control/config"
)

// This file checks the cross-references of the documents a reader follows:
// README.md and the other Markdown files, config.toml.example (which the
// package installs as /etc/vipd/vipd.toml), the man pages (vipd.toml(5)
// as mkman generates it from that file), the comments of the other
// shipped examples, of the maintainer scripts and of the Go files. A
// reference names a file and often a section of it, in one of these
// forms, all of which must resolve:
//
//   - a Markdown link, [text](path) or [text](path#anchor): the path
//     exists relative to the linking file, and the anchor is the GitHub
//     anchor of one of the target's headings (#anchor alone: the same file);
//   - a file, then a quoted section: docs/operations.md, "The XDP fast
//     path" (or README, "X", operations.md "X", [x.md](x.md)'s "X",
//     /usr/share/doc/vipd/x.md ("X")): the file exists and has a heading
//     of that title;
//   - section "X": a heading of the file named last before it in the
//     same paragraph;
//   - in Markdown, "X" below, "X" above, below, "X": a heading of the
//     same file;
//   - a vipd man page, vipd-decap(8): the package ships it;
//   - docs/x.md or /usr/share/doc/vipd/x.md alone: the file exists.
//
// A file named without a directory is looked up beside the file that
// names it, at the top of the tree and under docs/ (where the package
// puts them all: /usr/share/doc/vipd/). README is README.md. A heading is
// a Markdown heading outside code blocks, or the bold title a paragraph
// or list item starts with (**Frame size, measured.**); a reference may
// leave out the part of a title after a colon or in parentheses at its
// end ("Run-time changes" for "Run-time changes: weight, disable,
// enable, drain"). Case and `code` marks do not count.

// para is a paragraph of a document flattened to prose: whitespace runs
// are one space, and line[i] is the source line of s[i].
type para struct {
	s    string
	line []int
}

// doc is a document as the reference check reads it.
type doc struct {
	name  string // path from the top of the tree, or a description
	dir   string // directory relative names resolve against
	md    bool   // Markdown: links, anchors and same-file references
	paras []para
}

// builder collects a doc's paragraphs.
type builder struct {
	d    *doc
	s    []byte
	line []int
}

// add appends a line's text to the paragraph, whitespace runs as one
// space.
func (b *builder) add(text string, line int) {
	for _, f := range strings.Fields(text) {
		if len(b.s) > 0 {
			b.s = append(b.s, ' ')
			b.line = append(b.line, line)
		}
		b.s = append(b.s, f...)
		for range len(f) {
			b.line = append(b.line, line)
		}
	}
}

// brk ends the paragraph.
func (b *builder) brk() {
	if len(b.s) > 0 {
		b.d.paras = append(b.d.paras, para{string(b.s), b.line})
	}
	b.s, b.line = nil, nil
}

func (b *builder) done() *doc {
	b.brk()
	return b.d
}

// fenceRE opens or closes a Markdown code block.
var fenceRE = regexp.MustCompile("^\\s*(```|~~~)")

// readMarkdown reads a Markdown file: code blocks left out, each heading
// a paragraph of its own.
func readMarkdown(top, rel string) *doc {
	b := &builder{d: &doc{name: rel, dir: filepath.Dir(rel), md: true}}
	src, _ := os.ReadFile(filepath.Join(top, rel))
	inCode := false
	for i, line := range strings.Split(string(src), "\n") {
		switch {
		case fenceRE.MatchString(line):
			inCode = !inCode
			b.brk()
		case inCode:
		case strings.TrimSpace(line) == "":
			b.brk()
		case strings.HasPrefix(line, "#"):
			b.brk()
			b.add(line, i+1)
			b.brk()
		default:
			b.add(line, i+1)
		}
	}
	return b.done()
}

// readComments reads the comments of a file whose comments start with
// "#" (config.toml.example, the shipped examples): an empty comment or a
// line of settings ends a paragraph.
func readComments(top, rel string) *doc {
	b := &builder{d: &doc{name: rel, dir: filepath.Dir(rel)}}
	src, _ := os.ReadFile(filepath.Join(top, rel))
	for i, line := range strings.Split(string(src), "\n") {
		text, ok := strings.CutPrefix(strings.TrimSpace(line), "#")
		if !ok || strings.TrimSpace(text) == "" {
			b.brk()
			continue
		}
		b.add(text, i+1)
	}
	return b.done()
}

// roffText undoes the escapes the man pages use.
var roffText = strings.NewReplacer(`\-`, "-", `\e`, `\`, `\&`, "", `\fB`, "", `\fI`, "", `\fR`, "", `\fP`, "",
	`\(lq`, `"`, `\(rq`, `"`, `\(dq`, `"`, `\(em`, "—", `\ `, " ", `\%`, "")

// roffArgs splits a macro line's arguments, keeping "quoted" ones whole.
func roffArgs(s string) []string {
	var args []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] == '"' {
			end := strings.IndexByte(s[1:], '"')
			if end < 0 {
				end = len(s) - 1
			}
			args = append(args, s[1:1+end])
			s = s[min(len(s), end+2):]
			continue
		}
		end := strings.IndexAny(s, " \t")
		if end < 0 {
			end = len(s)
		}
		args = append(args, s[:end])
		s = s[end:]
	}
	return args
}

// readRoff reads a man page's text: the font macros' words, and a
// paragraph for each .TP, .PP, .SH and the like.
func readRoff(name, src string) *doc {
	b := &builder{d: &doc{name: name, dir: "docs"}}
	for i, line := range strings.Split(src, "\n") {
		n := i + 1
		if strings.HasPrefix(line, `.\"`) || strings.HasPrefix(line, `'\"`) {
			continue
		}
		if !strings.HasPrefix(line, ".") {
			b.add(roffText.Replace(line), n)
			continue
		}
		macro, rest, _ := strings.Cut(line, " ")
		switch macro {
		case ".B", ".I", ".SM":
			b.add(roffText.Replace(strings.Join(roffArgs(rest), " ")), n)
		case ".BR", ".RB", ".BI", ".IB", ".IR", ".RI":
			b.add(roffText.Replace(strings.Join(roffArgs(rest), "")), n)
		case ".SH", ".SS":
			b.brk()
			b.add(roffText.Replace(strings.Join(roffArgs(rest), " ")), n)
			b.brk()
		default:
			b.brk()
		}
	}
	return b.done()
}

// readGo reads a Go file's comments, each comment group a paragraph (and
// an empty comment line within one ends one).
func readGo(top, rel string) (*doc, error) {
	b := &builder{d: &doc{name: rel, dir: filepath.Dir(rel)}}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(top, rel), nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			line := fset.Position(c.Slash).Line
			if text, ok := strings.CutPrefix(c.Text, "//"); ok {
				if strings.HasPrefix(text, "go:") || strings.TrimSpace(text) == "" {
					b.brk()
					continue
				}
				b.add(text, line)
				continue
			}
			for i, l := range strings.Split(strings.TrimSuffix(strings.TrimPrefix(c.Text, "/*"), "*/"), "\n") {
				b.add(l, line+i)
			}
		}
		b.brk()
	}
	return b.done(), nil
}

// headings is what a reference may name in a Markdown file.
type headings struct {
	titles  []string        // normalized (norm)
	anchors map[string]bool // GitHub's anchors of the # headings
}

var (
	atxRE  = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	boldRE = regexp.MustCompile(`^\s*(?:[-*+]\s+|\d+\.\s+)?\*\*([^*]+)\*\*`)
	linkRE = regexp.MustCompile(`\[([^\]]*)\]\(([^)\s]*)\)`)
)

// plain drops the Markdown marks a title may carry: code, emphasis and
// links (their text stays).
func plain(s string) string {
	s = linkRE.ReplaceAllString(s, "$1")
	return strings.NewReplacer("`", "", "*", "").Replace(s)
}

// norm is a title as references are compared with it.
func norm(s string) string {
	s = strings.Join(strings.Fields(plain(s)), " ")
	return strings.ToLower(strings.TrimRight(s, ".:"))
}

// anchor is GitHub's anchor for a heading: lower case, letters, digits,
// hyphens and underscores kept, each space a hyphen, the rest dropped.
func anchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(plain(h))) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

func readHeadings(path string) (*headings, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	h := &headings{anchors: map[string]bool{}}
	seen := map[string]int{}
	inCode := false
	for line := range strings.Lines(string(src)) {
		line = strings.TrimRight(line, "\n")
		if fenceRE.MatchString(line) {
			inCode = !inCode
			continue
		}
		if inCode {
			continue
		}
		if m := atxRE.FindStringSubmatch(line); m != nil {
			h.titles = append(h.titles, norm(m[2]))
			a := anchor(m[2])
			if n := seen[a]; n > 0 {
				h.anchors[a+"-"+itoa(n)] = true
			} else {
				h.anchors[a] = true
			}
			seen[a]++
		} else if m := boldRE.FindStringSubmatch(line); m != nil {
			h.titles = append(h.titles, norm(m[1]))
		}
	}
	return h, nil
}

// has says whether title names one of the headings: the whole title, or
// its part before a colon or a closing parenthesis.
func (h *headings) has(title string) bool {
	t := norm(title)
	for _, h := range h.titles {
		if h == t || strings.HasPrefix(h, t+":") || strings.HasPrefix(h, t+" (") {
			return true
		}
	}
	return false
}

// xref holds what the check needs across documents.
type xref struct {
	t     *testing.T
	top   string
	pages map[string]bool // man pages the package ships: name(section)
	heads map[string]*headings
	n     int // references checked
}

func (x *xref) errorf(d *doc, p para, at int, format string, args ...any) {
	x.t.Helper()
	x.t.Errorf("%s:%d: "+format, append([]any{d.name, p.line[min(at, len(p.line)-1)]}, args...)...)
}

// resolve finds the file a prose reference names, as a path from the top
// of the tree; "" if none exists.
func (x *xref) resolve(d *doc, ref string) string {
	var cands []string
	if name, ok := strings.CutPrefix(ref, "/usr/share/doc/vipd/"); ok {
		if name == "README.md" {
			cands = []string{name}
		} else {
			cands = []string{filepath.Join("docs", name)}
		}
	} else {
		if ref == "README" {
			ref = "README.md"
		}
		cands = []string{filepath.Join(d.dir, ref), filepath.Clean(ref)}
		if !strings.Contains(ref, "/") {
			cands = append(cands, filepath.Join("docs", ref))
		}
	}
	for _, c := range cands {
		if _, err := os.Stat(filepath.Join(x.top, c)); err == nil {
			return c
		}
	}
	return ""
}

func (x *xref) headings(rel string) (*headings, error) {
	if h, ok := x.heads[rel]; ok {
		return h, nil
	}
	if filepath.Ext(rel) != ".md" {
		return nil, os.ErrInvalid
	}
	h, err := readHeadings(filepath.Join(x.top, rel))
	if err != nil {
		return nil, err
	}
	x.heads[rel] = h
	return h, nil
}

// section checks that the file rel has a heading title.
func (x *xref) section(d *doc, p para, at int, rel, title string) {
	x.t.Helper()
	x.n++
	h, err := x.headings(rel)
	if err != nil {
		x.errorf(d, p, at, "%q names a section of %s, which is not a Markdown file with headings (%v)", title, rel, err)
		return
	}
	if !h.has(title) {
		x.errorf(d, p, at, "%s has no heading %q", rel, title)
	}
}

const (
	// fileRE is a file named in prose: a Markdown file (with or
	// without a directory) or README.
	fileRE = `(?:/?[\w.-]+/)*(?:[\w-]+\.md|README)\b`
	// mdLinkRE is a Markdown link; its target's path is group 1.
	mdLinkRE = `\[[^\]]*\]\(([^)\s#]*)(?:#[^)\s]*)?\)`
)

var (
	// sectionRE: a file or a link, then a quoted section.
	sectionRE = regexp.MustCompile(`(?:(` + fileRE + `)|` + mdLinkRE + `)(?:'s)?[,:]? \(?"([^"]+)"`)
	// sectionWordRE: section "X", of the file named last before it.
	sectionWordRE = regexp.MustCompile(`\bsections? "([^"]+)"`)
	anyFileRE     = regexp.MustCompile(`(` + fileRE + `)|` + mdLinkRE)
	// hereRE: "X" below, "X" above, below, "X" (Markdown).
	hereRE   = regexp.MustCompile(`"([^"]+)" (?:below|above)\b|\b(?:below|above), "([^"]+)"`)
	pageRE   = regexp.MustCompile(`\b(vipd[\w.-]*\([1-9]\))`)
	docsRE   = regexp.MustCompile(`(?:^|[\s(\x60])((?:/usr/share/doc/vipd|docs)/[\w.-]+\.md)\b`)
	linksRE  = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)
	schemeRE = regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`)
)

func (x *xref) check(d *doc) {
	x.t.Helper()
	for _, p := range d.paras {
		s := p.s
		if d.md {
			for _, m := range linksRE.FindAllStringSubmatchIndex(s, -1) {
				target := s[m[2]:m[3]]
				if schemeRE.MatchString(target) {
					continue
				}
				x.n++
				path, frag, _ := strings.Cut(target, "#")
				rel := d.name
				if path != "" {
					rel = filepath.Join(d.dir, path)
					if _, err := os.Stat(filepath.Join(x.top, rel)); err != nil {
						x.errorf(d, p, m[0], "link to %s: no such file", target)
						continue
					}
				}
				if frag == "" {
					continue
				}
				h, err := x.headings(rel)
				if err != nil {
					x.errorf(d, p, m[0], "link to %s: an anchor in a file without headings (%v)", target, err)
				} else if !h.anchors[frag] {
					x.errorf(d, p, m[0], "link to %s: %s has no heading with anchor #%s", target, rel, frag)
				}
			}
			for _, m := range hereRE.FindAllStringSubmatchIndex(s, -1) {
				title := submatch(s, m, 1) + submatch(s, m, 2)
				x.section(d, p, m[0], d.name, title)
			}
		}
		for _, m := range sectionRE.FindAllStringSubmatchIndex(s, -1) {
			ref, title := submatch(s, m, 1), submatch(s, m, 3)
			var rel string
			if ref != "" {
				rel = x.resolve(d, ref)
			} else if link := submatch(s, m, 2); schemeRE.MatchString(link) {
				continue // a web page's section is not checked
			} else if link == "" {
				rel = d.name
			} else {
				rel = filepath.Join(d.dir, link)
			}
			if rel == "" {
				x.n++
				x.errorf(d, p, m[0], "%s, %q: no such file", ref, title)
				continue
			}
			x.section(d, p, m[0], rel, title)
		}
		for _, m := range sectionWordRE.FindAllStringSubmatchIndex(s, -1) {
			title := submatch(s, m, 1)
			var last []int
			for _, f := range anyFileRE.FindAllStringSubmatchIndex(s[:m[0]], -1) {
				last = f
			}
			if last == nil {
				x.n++
				x.errorf(d, p, m[0], "section %q of which file? Name it before, in the same paragraph", title)
				continue
			}
			var rel string
			if ref := submatch(s, last, 1); ref != "" {
				rel = x.resolve(d, ref)
			} else if link := submatch(s, last, 2); link == "" || schemeRE.MatchString(link) {
				x.n++
				x.errorf(d, p, m[0], "section %q of %s: name a file of the tree", title, s[last[0]:last[1]])
				continue
			} else {
				rel = filepath.Join(d.dir, link)
			}
			if rel == "" {
				x.n++
				x.errorf(d, p, m[0], "section %q of %s: no such file", title, s[last[0]:last[1]])
				continue
			}
			x.section(d, p, m[0], rel, title)
		}
		for _, m := range pageRE.FindAllStringSubmatchIndex(s, -1) {
			x.n++
			if page := submatch(s, m, 1); !x.pages[page] {
				x.errorf(d, p, m[0], "%s: the package ships no such man page", page)
			}
		}
		for _, m := range docsRE.FindAllStringSubmatchIndex(s, -1) {
			x.n++
			if ref := submatch(s, m, 1); x.resolve(d, ref) == "" {
				x.errorf(d, p, m[2], "%s: no such file", ref)
			}
		}
	}
}

func submatch(s string, m []int, i int) string {
	if 2*i+1 >= len(m) || m[2*i] < 0 {
		return ""
	}
	return s[m[2*i]:m[2*i+1]]
}

// TestCrossReferences fails for each reference in the documents, the man
// pages, the example configuration, the shipped examples and the Go
// comments that names a file, section, anchor or man page that does not
// exist (the forms are above).
func TestCrossReferences(t *testing.T) {
	top := root(t)
	x := &xref{t: t, top: top, heads: map[string]*headings{}, pages: map[string]bool{"vipd.toml(5)": true}}
	pages, err := filepath.Glob(filepath.Join(top, "packaging", "deb", "*.[1-9]"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no man pages under packaging/deb (%v)", err)
	}
	var docs []*doc
	for _, p := range pages {
		ext := filepath.Ext(p)
		x.pages[strings.TrimSuffix(filepath.Base(p), ext)+"("+ext[1:]+")"] = true
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(top, p)
		docs = append(docs, readRoff(rel, string(src)))
	}
	// vipd.toml(5) as mkman generates it.
	example, err := os.ReadFile(filepath.Join(top, "config.toml.example"))
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	if err := config.WriteManPage(&page, string(example), "test"); err != nil {
		t.Fatal(err)
	}
	docs = append(docs, readRoff("vipd.toml(5), generated from config.toml.example", page.String()))
	for _, rel := range []string{"config.toml.example", "packaging/deb/vipd-decap.default", "packaging/keepalived/keepalived.conf",
		"packaging/deb/postinst", "packaging/deb/prerm", "packaging/deb/postrm"} {
		docs = append(docs, readComments(top, rel))
	}
	err = filepath.WalkDir(top, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(top, path)
		if e.IsDir() {
			if rel != "." && (skipDir(rel) || e.Name() == "testdata" || strings.HasPrefix(e.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(rel, ".md"):
			docs = append(docs, readMarkdown(top, rel))
		case strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go"):
			d, err := readGo(top, rel)
			if err != nil {
				return err
			}
			docs = append(docs, d)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(docs, func(i, j int) bool { return docs[i].name < docs[j].name })
	for _, d := range docs {
		x.check(d)
	}
	if x.n < 100 {
		t.Errorf("only %d references checked in %d documents: the reading is broken", x.n, len(docs))
	}
	t.Logf("%d references checked in %d documents", x.n, len(docs))
}

// TestHeadingRules pins the reading of headings the check relies on:
// GitHub's anchors and the titles a reference may shorten.
func TestHeadingRules(t *testing.T) {
	for h, want := range map[string]string{
		"`make demo`":            "make-demo",
		"The failover, measured": "the-failover-measured",
		"What is vipd's, and what stays with the kernel":               "what-is-vipds-and-what-stays-with-the-kernel",
		"Run-time changes: weight, disable, enable, drain":             "run-time-changes-weight-disable-enable-drain",
		"Scale-out: several boxes behind routers":                      "scale-out-several-boxes-behind-routers",
		"QUIC-LB: routing QUIC by the server ID in its connection IDs": "quic-lb-routing-quic-by-the-server-id-in-its-connection-ids",
		"[docs](x.md) and `fast_path`":                                 "docs-and-fast_path",
	} {
		if got := anchor(h); got != want {
			t.Errorf("anchor(%q) = %q, want %q", h, got, want)
		}
	}
	h := &headings{titles: []string{norm("Run-time changes: weight, disable, enable, drain"), norm("Two boxes on one segment, without BGP (keepalived)"), norm("**Frame size, measured.**")}}
	for title, want := range map[string]bool{
		"Run-time changes": true, "run-time changes: weight, disable, enable, drain": true,
		"Two boxes on one segment, without BGP": true, "Frame size, measured": true,
		"Run-time": false, "Two boxes": false, "Frame size": false, "Failover without BGP": false,
	} {
		if got := h.has(title); got != want {
			t.Errorf("has(%q) = %v, want %v", title, got, want)
		}
	}
}
