package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// debVersion runs packaging/debversion in dir (a git checkout) for the
// commit given, or for the working tree without one.
func debVersion(t *testing.T, dir string, commit ...string) string {
	t.Helper()
	script, err := filepath.Abs("debversion")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(run(t, dir, nil, script, commit...))
}

// versionLess fails the test unless dpkg orders a before b, as apt does
// when it decides whether b upgrades a.
func versionLess(t *testing.T, a, b, why string) {
	t.Helper()
	if err := exec.Command("dpkg", "--compare-versions", a, "lt", b).Run(); err != nil {
		t.Errorf("dpkg --compare-versions %s lt %s is false (%v): %s", a, b, err, why)
	}
}

// TestDebVersionSorts: the version `make deb` gives a build sorts by age
// over real commits of this repository, so that apt never takes an
// upgrade for a downgrade: each of the last commits above each of its
// parents, eec0798 below b9a16d0 (which a version made of the hash alone
// got wrong), every version above those the old scheme (0.0~git<hash>)
// gave, and a build from a working tree with changes ("+dirty") above
// its commit's and below its child's.
func TestDebVersionSorts(t *testing.T) {
	need(t, "git", "dpkg", "make")
	top, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "-C", top, "rev-parse", "--is-shallow-repository").Output(); err != nil || strings.TrimSpace(string(out)) != "false" {
		t.Skipf("not a full git clone (%v, %q): the versions are made from its history", err, out)
	}

	// make deb uses this version for the working tree.
	dry := run(t, top, nil, "make", "-s", "-n", "deb")
	m := regexp.MustCompile(`packaging/mkdeb '([^']+)'`).FindStringSubmatch(dry)
	if m == nil {
		t.Fatalf("make -n deb does not run packaging/mkdeb with a version:\n%s", dry)
	}
	if want := debVersion(t, top); m[1] != want {
		t.Errorf("make deb builds version %s, packaging/debversion says %s", m[1], want)
	}
	if !regexp.MustCompile(`^0\.0\+git[0-9]+\.[0-9]{8}\.[0-9a-f]{7,}(\+dirty)?$`).MatchString(m[1]) {
		t.Errorf("make deb's version %q is not 0.0+git<count>.<YYYYMMDD>.<hash>[+dirty]", m[1])
	}

	// Each of the last commits sorts above each of its parents (merges
	// have two).
	const last = 40
	edges := 0
	for line := range strings.Lines(run(t, top, nil, "git", "rev-list", "--parents", "-n", strconv.Itoa(last), "HEAD")) {
		f := strings.Fields(line)
		v := debVersion(t, top, f[0])
		for _, p := range f[1:] {
			versionLess(t, debVersion(t, top, p), v, "commit "+p[:7]+" is a parent of "+f[0][:7])
			edges++
		}
	}
	if edges < last-1 {
		t.Errorf("only %d parent-child pairs among the last %d commits", edges, last)
	}

	// The pair the hash-only versions sorted wrong: eec0798 is older than
	// b9a16d0 (its ancestor), yet 0.0~giteec0798 sorted above it.
	if exec.Command("git", "-C", top, "merge-base", "--is-ancestor", "eec0798", "b9a16d0").Run() == nil {
		older, newer := debVersion(t, top, "eec0798"), debVersion(t, top, "b9a16d0")
		versionLess(t, older, newer, "eec0798 is an ancestor of b9a16d0")
		// A box with a build of the old scheme upgrades to any new one,
		// even to an older commit's: its hash b9a16d0 began with a letter,
		// which sorted above every digit.
		versionLess(t, "0.0~gitb9a16d0+dirty", older, "the old scheme's versions must sort below the new one's")
	} else {
		t.Log("eec0798 or b9a16d0 is not in this clone's history: that pair is not checked")
	}

	// +dirty, in a clone of this repository (sharing its objects) whose
	// working tree the test may change.
	head := strings.TrimSpace(run(t, top, nil, "git", "rev-parse", "HEAD"))
	clone := filepath.Join(t.TempDir(), "clone")
	run(t, "", nil, "git", "clone", "-q", "--shared", "--no-checkout", top, clone)
	dirty := func(commit string) string {
		t.Helper()
		run(t, clone, nil, "git", "checkout", "-q", "-f", "--detach", commit)
		clean := debVersion(t, clone)
		if want := debVersion(t, top, commit); clean != want {
			t.Errorf("clean checkout of %s: version %s, want %s", commit[:7], clean, want)
		}
		f, err := os.OpenFile(filepath.Join(clone, "README.md"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString("\nchanged\n"); err != nil {
			t.Fatal(err)
		}
		f.Close()
		d := debVersion(t, clone)
		if d != clean+"+dirty" {
			t.Errorf("checkout of %s with README.md changed: version %s, want %s+dirty", commit[:7], d, clean)
		}
		versionLess(t, clean, d, "a build with changes sorts above its commit's")
		return d
	}
	dirty(head)
	if parent, err := exec.Command("git", "-C", top, "rev-parse", "HEAD^").Output(); err == nil {
		versionLess(t, dirty(strings.TrimSpace(string(parent))), debVersion(t, top, head), "a build of HEAD^ with changes sorts below HEAD's")
	}
}
