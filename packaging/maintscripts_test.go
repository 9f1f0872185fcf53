package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The maintainer scripts the package ships, from deb/.
var maintScripts = []string{"postinst", "prerm", "postrm"}

// recorder is a stand-in for systemctl, deb-systemd-invoke and (in
// TestMaintainerScriptsUnderSystemd) deb-systemd-helper: it appends its
// name and arguments to $LOG and changes nothing. As systemctl it says
// that vipd.service is active and vipd-decap.service is not.
const recorder = `#!/bin/sh
echo "${0##*/} $*" >> "$LOG"
if [ "${0##*/} $1 $2" = "systemctl --quiet is-active" ]; then
	[ "$3" = vipd.service ]
	exit
fi
exit 0
`

// shimDir makes a directory for PATH holding only the recorders named
// and links to the real commands named: a script run with it as its
// whole PATH can run nothing else.
func shimDir(t *testing.T, recorders, real []string) string {
	t.Helper()
	bin := t.TempDir()
	for _, name := range recorders {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(recorder), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range real {
		p, err := exec.LookPath(name)
		if err != nil {
			t.Skipf("%s is not installed (Debian: init-system-helpers): the maintainer scripts are not run", name)
		}
		if err := os.Symlink(p, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

// readLog returns the recorded calls, one a line.
func readLog(t *testing.T, log string) []string {
	t.Helper()
	b, err := os.ReadFile(log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// TestMaintainerScriptsFakeRoot runs postinst, prerm and postrm as dpkg
// would with DPKG_ROOT set to a fake root that holds the units, with the
// real deb-systemd-helper (which then works on the fake root's files
// only) and recorders for systemctl and deb-systemd-invoke, which must
// not be called: under DPKG_ROOT (as in a chroot) the scripts touch no
// running systemd. Through an installation, an operator's systemctl
// enable, an upgrade, a removal and a purge, it checks that no unit is
// enabled on installation, that an enabled one stays enabled across an
// upgrade and a removal, and that a purge removes the enable link, the
// helper's state and /var/lib/vipd; and the same for a box upgraded from
// a package without maintainer scripts.
func TestMaintainerScriptsFakeRoot(t *testing.T) {
	bin := shimDir(t, []string{"systemctl", "deb-systemd-invoke"}, []string{"deb-systemd-helper", "rm"})
	log := filepath.Join(t.TempDir(), "calls")
	const (
		wants    = "etc/systemd/system/multi-user.target.wants/"
		stateDir = "var/lib/systemd/deb-systemd-helper-enabled/"
	)
	newRoot := func() string {
		root := t.TempDir()
		units := filepath.Join(root, "lib/systemd/system")
		if err := os.MkdirAll(units, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, u := range []string{"vipd.service", "vipd-decap.service"} {
			b, err := os.ReadFile(filepath.Join("deb", u))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(units, u), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return root
	}
	maint := func(root, script string, args ...string) {
		t.Helper()
		script, err := filepath.Abs(filepath.Join("deb", script))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("/bin/sh", append([]string{script}, args...)...)
		cmd.Dir = root
		cmd.Env = []string{"PATH=" + bin, "LOG=" + log, "DPKG_ROOT=" + root,
			"DPKG_MAINTSCRIPT_PACKAGE=vipd", "DPKG_MAINTSCRIPT_NAME=" + filepath.Base(script)}
		if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("%s %s: %v, output %q", filepath.Base(script), strings.Join(args, " "), err, out)
		}
		if calls := readLog(t, log); len(calls) > 0 {
			t.Errorf("%s %s under DPKG_ROOT called %q", filepath.Base(script), strings.Join(args, " "), calls)
			os.Remove(log)
		}
	}
	exists := func(root, rel string) bool {
		_, err := os.Lstat(filepath.Join(root, rel))
		return err == nil
	}
	enable := func(root, unit string) { // what systemctl enable does
		t.Helper()
		if err := os.MkdirAll(filepath.Join(root, wants), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/lib/systemd/system/"+unit, filepath.Join(root, wants, unit)); err != nil {
			t.Fatal(err)
		}
	}
	removeFiles := func(root string) { // what dpkg does between prerm and postrm remove
		t.Helper()
		for _, u := range []string{"vipd.service", "vipd-decap.service"} {
			if err := os.Remove(filepath.Join(root, "lib/systemd/system", u)); err != nil {
				t.Fatal(err)
			}
		}
	}
	purge := func(root string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(root, "var/lib/vipd"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "var/lib/vipd/state.json"), []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
		maint(root, "postrm", "purge")
		for _, rel := range []string{wants + "vipd.service", wants + "vipd-decap.service",
			stateDir + "vipd.service.dsh-also", stateDir + "vipd-decap.service.dsh-also", "var/lib/vipd"} {
			if exists(root, rel) {
				t.Errorf("after purge, %s is left", rel)
			}
		}
	}

	// Installation: nothing enabled, the enable links recorded.
	root := newRoot()
	maint(root, "postinst", "configure")
	for _, u := range []string{"vipd.service", "vipd-decap.service"} {
		if exists(root, wants+u) {
			t.Errorf("installation enabled %s", u)
		}
		b, err := os.ReadFile(filepath.Join(root, stateDir, u+".dsh-also"))
		if err != nil || !strings.Contains(string(b), "/"+wants+u+"\n") {
			t.Errorf("installation did not record %s's enable link for a purge: %q, %v", u, b, err)
		}
	}
	// The operator enables vipd; an upgrade keeps that, and enables
	// nothing else.
	enable(root, "vipd.service")
	maint(root, "prerm", "upgrade", "0.0+git2.20260102.bbbbbbb")
	maint(root, "postinst", "configure", "0.0+git1.20260101.aaaaaaa")
	if !exists(root, wants+"vipd.service") {
		t.Error("an upgrade disabled vipd.service, which the operator had enabled")
	}
	if exists(root, wants+"vipd-decap.service") {
		t.Error("an upgrade enabled vipd-decap.service")
	}
	// A removal keeps the operator's choice for a reinstallation.
	maint(root, "prerm", "remove")
	removeFiles(root)
	maint(root, "postrm", "remove")
	if !exists(root, wants+"vipd.service") {
		t.Error("a removal (not a purge) removed vipd.service's enable link")
	}
	purge(root)

	// A box that had the package without maintainer scripts, with vipd
	// enabled: the upgrade records the link, so that a purge removes it.
	root = newRoot()
	enable(root, "vipd.service")
	maint(root, "postinst", "configure", "0.0~gitb9a16d0")
	if !exists(root, wants+"vipd.service") || exists(root, wants+"vipd-decap.service") {
		t.Error("an upgrade from a package without maintainer scripts changed which units are enabled")
	}
	maint(root, "prerm", "remove")
	removeFiles(root)
	maint(root, "postrm", "remove")
	purge(root)
}

// TestMaintainerScriptsUnderSystemd runs the scripts as on a box that
// runs systemd, in a mount namespace of their own where /run (with
// /run/systemd/system) and /var/lib are empty tmpfs, with recorders for
// systemctl, deb-systemd-invoke and deb-systemd-helper as the whole PATH
// (besides rm): nothing reaches this machine's systemd or files. It
// checks what they ask of systemd: a daemon-reload after installing,
// upgrading and removing; no start, no restart and no stop on an upgrade,
// but a word on stderr for the unit that keeps running the old version;
// a stop of both units on removal; a purge of their enable state.
func TestMaintainerScriptsUnderSystemd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the scripts run in a mount namespace of their own")
	}
	need(t, "unshare", "mount")
	bin := shimDir(t, []string{"systemctl", "deb-systemd-invoke", "deb-systemd-helper"}, []string{"rm"})
	log := filepath.Join(t.TempDir(), "calls")
	// set -e: a mount that fails ends the run before the script.
	const ns = `mount -t tmpfs tmpfs /run
mkdir -p /run/systemd/system
mount -t tmpfs tmpfs /var/lib
mkdir /var/lib/vipd
PATH=$BIN exec /bin/sh "$@"`
	maint := func(script string, args ...string) (calls []string, stderr string) {
		t.Helper()
		path, err := filepath.Abs(filepath.Join("deb", script))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "/bin/sh", "-ec", ns, "sh", path}, args...)...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "BIN=" + bin, "LOG=" + log,
			"DPKG_MAINTSCRIPT_PACKAGE=vipd", "DPKG_MAINTSCRIPT_NAME=" + script}
		var errb strings.Builder
		cmd.Stderr = &errb
		out, err := cmd.Output()
		if err != nil || len(out) > 0 {
			t.Errorf("%s %s: %v, stdout %q, stderr %q", script, strings.Join(args, " "), err, out, errb.String())
		}
		calls = readLog(t, log)
		os.Remove(log)
		return calls, errb.String()
	}
	// never: what no script may ask of systemd in any case here.
	never := func(what string, calls []string) {
		t.Helper()
		for _, c := range calls {
			f := strings.Fields(c)
			if f[0] == "deb-systemd-invoke" && f[1] != "stop" ||
				f[0] == "systemctl" && slices.ContainsFunc(f[1:], func(a string) bool {
					return slices.Contains([]string{"start", "restart", "try-restart", "reload-or-restart", "enable", "preset"}, a)
				}) {
				t.Errorf("%s asked %q", what, c)
			}
		}
	}
	reload := "systemctl --system daemon-reload"

	calls, stderr := maint("postinst", "configure")
	never("installation", calls)
	if !slices.Contains(calls, reload) || stderr != "" {
		t.Errorf("installation: calls %q, stderr %q; want a daemon-reload and nothing said", calls, stderr)
	}
	if !slices.Contains(calls, "deb-systemd-helper update-state vipd.service") || !slices.Contains(calls, "deb-systemd-helper update-state vipd-decap.service") {
		t.Errorf("installation does not record the units' state: %q", calls)
	}

	calls, _ = maint("prerm", "upgrade", "0.0+git2.20260102.bbbbbbb")
	if len(calls) > 0 {
		t.Errorf("prerm upgrade asked %q: an upgrade must not stop the box", calls)
	}
	calls, stderr = maint("postinst", "configure", "0.0+git1.20260101.aaaaaaa")
	never("an upgrade", calls)
	if !slices.Contains(calls, reload) {
		t.Errorf("an upgrade does not daemon-reload: %q", calls)
	}
	// The recorder says vipd.service is active, vipd-decap.service not.
	if !strings.Contains(stderr, "vipd.service was not restarted: it still runs 0.0+git1.20260101.aaaaaaa") ||
		!strings.Contains(stderr, "Upgrading a box without dropping flows") || strings.Contains(stderr, "vipd-decap.service") {
		t.Errorf("an upgrade with vipd.service running said %q", stderr)
	}

	calls, _ = maint("prerm", "remove")
	if want := []string{"deb-systemd-invoke stop vipd.service vipd-decap.service"}; !slices.Equal(calls, want) {
		t.Errorf("prerm remove asked %q, want %q", calls, want)
	}
	calls, _ = maint("postrm", "remove")
	never("postrm remove", calls)
	if !slices.Equal(calls, []string{reload}) {
		t.Errorf("postrm remove asked %q, want a daemon-reload alone", calls)
	}
	calls, _ = maint("postrm", "purge")
	never("postrm purge", calls)
	if !slices.Contains(calls, "deb-systemd-helper purge vipd.service vipd-decap.service") || !slices.Contains(calls, reload) {
		t.Errorf("postrm purge asked %q, want deb-systemd-helper purge of both units and a daemon-reload", calls)
	}
}

// checkMaintScripts: the package holds deb/'s postinst, prerm and postrm
// as they are, executable, and sh parses each.
func checkMaintScripts(t *testing.T, deb string) {
	t.Helper()
	ctrl := filepath.Join(t.TempDir(), "DEBIAN")
	run(t, "", nil, "dpkg-deb", "--control", deb, ctrl)
	for _, s := range maintScripts {
		path := filepath.Join(ctrl, s)
		fi, err := os.Stat(path)
		if err != nil {
			t.Errorf("the package has no %s: %v", s, err)
			continue
		}
		if fi.Mode().Perm() != 0o755 {
			t.Errorf("the package's %s has mode %v, want 0755", s, fi.Mode().Perm())
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("deb", s))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("the package's %s is not deb/%s", s, s)
		}
		if !strings.HasPrefix(string(got), "#!/bin/sh\n") {
			t.Errorf("%s does not start with #!/bin/sh", s)
		}
		if out, err := exec.Command("sh", "-n", path).CombinedOutput(); err != nil {
			t.Errorf("sh -n %s: %v\n%s", s, err, out)
		}
	}
}
