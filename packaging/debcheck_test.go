package packaging

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// checkMD5Sums: the package has DEBIAN/md5sums (dpkg --verify reads it,
// lintian asks for it) and it covers every file with the right sums.
func checkMD5Sums(t *testing.T, deb, root string) {
	t.Helper()
	sums := run(t, "", nil, "dpkg-deb", "-I", deb, "md5sums")
	var files []string
	for line := range strings.SplitSeq(strings.TrimSpace(sums), "\n") {
		if _, file, ok := strings.Cut(line, "  "); ok {
			files = append(files, file)
		}
	}
	for _, want := range []string{"usr/sbin/vipd", "etc/vipd/vipd.toml", "usr/share/doc/vipd/copyright"} {
		if !slices.Contains(files, want) {
			t.Errorf("md5sums lacks %s:\n%s", want, sums)
		}
	}
	cmd := exec.Command("md5sum", "-c", "--quiet")
	cmd.Dir = root
	cmd.Stdin = strings.NewReader(sums)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("md5sum -c on the extracted package: %v\n%s", err, out)
	}
}

// flagNames returns the flags a Go command lists for -h ("  -name ...");
// a subcommand may have none.
func flagNames(bin string, args ...string) []string {
	out, _ := exec.Command(bin, append(args, "-h")...).CombinedOutput()
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^  (-[a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		names = append(names, m[1])
	}
	return names
}

// checkManPages: both section 8 pages format without a groff or man
// warning (what lintian's groff-message reports), vipd-decap(8)
// documents every flag of the packaged vipd-decap, and vipd-decap -h
// points at its page.
func checkManPages(t *testing.T, root string) {
	t.Helper()
	if _, err := exec.LookPath("man"); err != nil {
		t.Log("man (man-db) is not installed: the pages' formatting is not checked")
	} else {
		for _, page := range []string{"vipd.8.gz", "vipd-decap.8.gz"} {
			cmd := exec.Command("man", "--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z", filepath.Join(root, "usr/share/man/man8", page))
			cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8", "MANROFFSEQ=", "MANWIDTH=80")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			// Like lintian, leave out the warnings about a line too long
			// to fill or break (a long path): they change nothing but the
			// spacing.
			msgs := regexp.MustCompile(`(?m)^.*(cannot adjust|can't break) line.*\n?`).ReplaceAllString(stderr.String(), "")
			if err != nil || msgs != "" {
				t.Errorf("man --warnings %s: %v\n%s", page, err, msgs)
			}
		}
	}
	page := gunzip(t, filepath.Join(root, "usr/share/man/man8/vipd-decap.8.gz"))
	bin := filepath.Join(root, "usr/sbin/vipd-decap")
	flags := flagNames(bin)
	if len(flags) < 10 {
		t.Errorf("vipd-decap -h lists only the flags %v", flags)
	}
	for _, f := range flags {
		// In roff a hyphen in a flag is written \-.
		if !strings.Contains(page, `.B `+strings.ReplaceAll(f, "-", `\-`)) && !strings.Contains(page, `.BI `+strings.ReplaceAll(f, "-", `\-`)+" ") {
			t.Errorf("vipd-decap(8) does not document %s", f)
		}
	}
	out, _ := exec.Command(bin, "-h").CombinedOutput()
	if !strings.Contains(string(out), "vipd-decap(8)") || strings.Contains(string(out), "go doc") || strings.Contains(string(out), "issue 18") {
		t.Errorf("vipd-decap -h should point at vipd-decap(8), not go doc or an issue:\n%s", out)
	}
}

// checkCopyright: /usr/share/doc/vipd/copyright is DEP-5, with vipd's own
// paragraph and one for every Go module compiled into the binaries (the
// static binaries carry their code, and their licenses ask for their
// notices), each with a license.
func checkCopyright(t *testing.T, root string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "usr/share/doc/vipd/copyright"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if !strings.HasPrefix(text, "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n") {
		t.Errorf("copyright is not in the machine-readable format:\n%.300s", text)
	}
	paras := strings.Split(text, "\n\n")
	files := map[string]string{} // Files pattern -> paragraph
	for _, p := range paras {
		if rest, ok := strings.CutPrefix(p, "Files: "); ok {
			pattern, _, _ := strings.Cut(rest, "\n")
			files[pattern] = p
		}
	}
	mods := run(t, "..", nil, "go", "list", "-deps", "-f", "{{with .Module}}{{if not .Main}}{{.Path}}{{end}}{{end}}", "./cmd/vipd", "./cmd/vipd-decap")
	want := []string{"*", "go/*"}
	for m := range strings.FieldsSeq(mods) {
		want = append(want, m+"/*")
	}
	for _, w := range want {
		p, ok := files[w]
		if !ok {
			t.Errorf("copyright has no paragraph Files: %s", w)
			continue
		}
		if !regexp.MustCompile(`(?m)^Copyright: \S`).MatchString(p) || !regexp.MustCompile(`(?m)^License: \S`).MatchString(p) {
			t.Errorf("copyright paragraph Files: %s lacks Copyright or License:\n%s", w, p)
		}
	}
}

// checkLintian runs Debian's lintian on the package: no error and no
// warning, every override (packaging/deb/lintian-overrides) used or
// merely informational, and each with a comment that justifies it.
func checkLintian(t *testing.T, deb string) {
	if _, err := exec.LookPath("lintian"); err != nil {
		t.Skip("lintian is not installed: make test-deps installs it as root")
	}
	// --fail-on none: the hints are judged here, from the output.
	out, err := exec.Command("lintian", "--fail-on", "none", "--pedantic", "-I", "-E", deb).CombinedOutput()
	if err != nil {
		t.Fatalf("lintian: %v\n%s", err, out)
	}
	t.Logf("lintian:\n%s", out)
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "E: ") || strings.HasPrefix(line, "W: ") {
			t.Errorf("lintian: %s", line)
		}
	}
	b, err := os.ReadFile("deb/lintian-overrides")
	if err != nil {
		t.Fatal(err)
	}
	commented := false
	for line := range strings.SplitSeq(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "#"):
			commented = true
		case strings.TrimSpace(line) == "":
			commented = false
		case !commented:
			t.Errorf("lintian override without a comment above it: %s", line)
		}
	}
}
