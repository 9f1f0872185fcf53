package packaging

import (
	"compress/gzip"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// need skips the test when a tool is missing (dpkg-deb is in dpkg,
// systemd-analyze in systemd: a Debian machine has both).
func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: the package is not built (Debian: apt-get install dpkg systemd)", tool)
		}
	}
}

func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestDeb builds the package as `make deb` does and checks it the way an
// installation would use it.
func TestDeb(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the package is built by the full run")
	}
	need(t, "dpkg-deb", "dpkg", "systemd-analyze")
	dir := t.TempDir()
	deb := filepath.Join(dir, "vipd.deb")
	run(t, "..", []string{"DEB_COMPRESS=gzip"}, "packaging/mkdeb", "1.2.3", deb)

	contents := run(t, "", nil, "dpkg-deb", "-c", deb)
	// Every page under docs/ ships: they link to each other.
	pages, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs/*.md found (%v)", err)
	}
	for _, p := range pages {
		if path := "./usr/share/doc/vipd/" + filepath.Base(p); !strings.Contains(contents, " "+path+"\n") {
			t.Errorf("the package lacks %s:\n%s", path, contents)
		}
	}
	for _, path := range []string{
		"./usr/sbin/vipd", "./usr/sbin/vipd-decap", "./etc/vipd/vipd.toml", "./etc/default/vipd-decap",
		"./lib/systemd/system/vipd.service", "./lib/systemd/system/vipd-decap.service",
		"./usr/share/man/man8/vipd.8.gz", "./usr/share/man/man5/vipd.toml.5.gz",
		"./usr/share/man/man8/vipd-decap.8.gz",
		"./usr/share/vipd/grafana-dashboard.json", "./usr/share/vipd/prometheus-rules.yml",
		"./usr/share/doc/vipd/README.md", "./usr/share/doc/vipd/copyright", "./usr/share/doc/vipd/changelog.gz",
		"./usr/share/doc/vipd/examples/keepalived.conf",
		"./usr/share/bash-completion/completions/vipd", "./usr/share/lintian/overrides/vipd",
	} {
		if !strings.Contains(contents, " "+path+"\n") {
			t.Errorf("the package lacks %s:\n%s", path, contents)
		}
	}
	if !strings.Contains(contents, "-rwxr-xr-x root/root") {
		t.Errorf("no executable owned by root:\n%s", contents)
	}
	for field, want := range map[string]string{"Package": "vipd", "Version": "1.2.3", "Architecture": run(t, "", nil, "go", "env", "GOARCH")} {
		if got := run(t, "", nil, "dpkg-deb", "-f", deb, field); strings.TrimSpace(got) != strings.TrimSpace(want) {
			t.Errorf("control field %s = %q, want %q", field, got, want)
		}
	}
	if conf := run(t, "", nil, "dpkg-deb", "-I", deb, "conffiles"); !strings.Contains(conf, "/etc/vipd/vipd.toml\n") {
		t.Errorf("/etc/vipd/vipd.toml is not a conffile: %q", conf)
	}

	root := filepath.Join(dir, "root")
	run(t, "", nil, "dpkg", "-x", deb, root)
	verifyUnits(t, root)
	checkMD5Sums(t, deb, root)
	checkMaintScripts(t, deb)
	checkManPages(t, root)
	checkCopyright(t, root)
	if log := gunzip(t, filepath.Join(root, "usr/share/doc/vipd/changelog.gz")); !strings.HasPrefix(log, "vipd (1.2.3) unstable; urgency=medium\n") {
		t.Errorf("changelog.gz does not start with the package's version:\n%s", log)
	}
	t.Run("lintian", func(t *testing.T) { checkLintian(t, deb) })
	t.Run("completion", func(t *testing.T) { checkCompletion(t, root) })

	// The packaged binary accepts the packaged configuration.
	out := run(t, "", nil, filepath.Join(root, "usr/sbin/vipd"), "-check", "-config", filepath.Join(root, "etc/vipd/vipd.toml"))
	if !strings.Contains(out, "vipd.toml: OK") {
		t.Errorf("vipd -check on the packaged configuration:\n%s", out)
	}
	checkDecapDefault(t, root)
	if out := run(t, "", nil, filepath.Join(root, "usr/sbin/vipd"), "-version"); out != "vipd 1.2.3\n" {
		t.Errorf("vipd -version = %q, want the package's version", out)
	}
	// Built without DWARF, with the symbol table that perf reads.
	for _, cmd := range []string{"vipd", "vipd-decap"} {
		f, err := elf.Open(filepath.Join(root, "usr/sbin", cmd))
		if err != nil {
			t.Fatal(err)
		}
		if f.Section(".debug_info") != nil {
			t.Errorf("%s has DWARF (.debug_info): mkdeb's -w is gone", cmd)
		}
		syms, err := f.Symbols()
		if err != nil || !slices.ContainsFunc(syms, func(s elf.Symbol) bool { return s.Name == "main.main" }) {
			t.Errorf("%s has no symbol main.main (%v): perf could not name its functions", cmd, err)
		}
		f.Close()
	}
	// The generated page documents the keys (config's test checks all).
	page := gunzip(t, filepath.Join(root, "usr/share/man/man5/vipd.toml.5.gz"))
	for _, entry := range []string{".TH VIPD.TOML 5", ".B dataplane.ingress\n", ".B vip.backend.weight\n", ".B bgp.peer.address\n"} {
		if !strings.Contains(page, entry) {
			t.Errorf("vipd.toml(5) lacks %q", entry)
		}
	}
}

// checkDecapDefault: the packaged vipd-decap accepts the example flags
// of /etc/default/vipd-decap, and refuses the file's own empty flags,
// naming -allow (vipd-decap has no default that accepts every source).
func checkDecapDefault(t *testing.T, root string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "etc/default/vipd-decap"))
	if err != nil {
		t.Fatal(err)
	}
	var example []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, `# VIPD_DECAP_ARGS="`); ok {
			example = strings.Fields(strings.TrimSuffix(rest, `"`))
		}
	}
	if len(example) == 0 {
		t.Fatalf("/etc/default/vipd-decap has no example VIPD_DECAP_ARGS:\n%s", b)
	}
	bin := filepath.Join(root, "usr/sbin/vipd-decap")
	if out := run(t, "", nil, bin, append([]string{"-check"}, example...)...); !strings.Contains(out, "flags valid") {
		t.Errorf("vipd-decap -check %s:\n%s", strings.Join(example, " "), out)
	}
	out, err := exec.Command(bin, "-check").CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "-allow is required") {
		t.Errorf("vipd-decap -check without flags: %v, %s; want exit 2 naming -allow", err, out)
	}
}

// verifyUnits runs systemd-analyze verify on the extracted units with
// root as the file system, so that the binaries are looked up where the
// package put them. The root gets the host's units (sysinit.target & co.,
// which every service depends on) and kill (ExecReload); systemd-analyze
// exits 0 on unknown keys and bad values, so any output fails the test.
func verifyUnits(t *testing.T, root string) {
	t.Helper()
	run(t, "", nil, "cp", "-rn", "/lib/systemd/system/.", filepath.Join(root, "lib/systemd/system/"))
	if err := os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("usr/bin", filepath.Join(root, "bin")); err != nil {
		t.Fatal(err)
	}
	kill, err := exec.LookPath("kill")
	if err != nil {
		t.Fatal(err)
	}
	run(t, "", nil, "cp", kill, filepath.Join(root, "usr/bin/kill"))
	units := []string{filepath.Join(root, "lib/systemd/system/vipd.service"), filepath.Join(root, "lib/systemd/system/vipd-decap.service")}
	// --man=no: the host's man does not see the root's pages.
	if out := run(t, "", nil, "systemd-analyze", append([]string{"verify", "--man=no", "--root=" + root}, units...)...); out != "" {
		t.Errorf("systemd-analyze verify:\n%s", out)
	}
}

func gunzip(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// promtool returns Prometheus's promtool: on PATH, or where `make test-deps`
// extracts it from Debian's prometheus package (bin/tools).
func promtool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	p, err := filepath.Abs("../bin/tools/promtool")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Skip("promtool is missing: `make test-deps` as root extracts it from Debian's prometheus package into bin/tools")
	}
	return p
}

// TestRules checks the alerting rules with promtool, and runs their unit
// tests (testdata/rules_test.yml): each alert fires on what should fire it.
func TestRules(t *testing.T) {
	pt := promtool(t)
	run(t, "", nil, pt, "check", "rules", "monitoring/prometheus-rules.yml")
	run(t, "", nil, pt, "test", "rules", "testdata/rules_test.yml")
}
