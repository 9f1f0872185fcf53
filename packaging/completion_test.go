package packaging

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vipd/vipd/control/config"
)

// completionSubcommands is the subcommand list of the packaged completion,
// in its order.
var completionSubcommands = []string{"status", "events", "drain", "where", "drain-box", "top", "peers", "conns", "weight", "enable", "disable", "reload", "active", "standby", "keepalived-notify", "keepalived-check", "fleet"}

// checkCompletion loads the packaged bash completion into bash with
// Debian's bash-completion and the packaged vipd first on PATH, and
// checks what it offers: the subcommands (every one vipd -h names among
// them), every flag of vipd and of each subcommand as the binary lists
// them, the values of -log-level, and VIP names and backends from the
// configuration named by -config.
func checkCompletion(t *testing.T, root string) {
	const lib = "/usr/share/bash-completion/bash_completion"
	if _, err := os.Stat(lib); err != nil {
		t.Skipf("%s is missing: make test-deps installs bash-completion as root", lib)
	}
	bin := filepath.Join(root, "usr/sbin/vipd")
	conf := filepath.Join(root, "etc/vipd/vipd.toml")

	top := flagNames(bin)
	if !slices.Contains(top, "-config") {
		t.Fatalf("vipd -h lists the flags %v, without -config", top)
	}
	type tc struct {
		words []string // COMP_WORDS, the last one being completed
		want  []string
	}
	cases := []tc{
		{[]string{"vipd", ""}, completionSubcommands},
		{[]string{"vipd", "dr"}, []string{"drain", "drain-box"}},
		{[]string{"vipd", "-"}, append(top, "-h")},
		{[]string{"vipd", "-log-level", ""}, []string{"debug", "info", "warn", "error"}},
		{[]string{"vipd", "-log-format", ""}, []string{"text", "json"}},
		{[]string{"vipd", "status", "-admin", ""}, nil},
	}
	// vipd -h names each subcommand on a line "  vipd NAME ...".
	usage, _ := exec.Command(bin, "-h").CombinedOutput()
	for _, m := range regexp.MustCompile(`(?m)^  vipd ([a-z][a-z-]*)`).FindAllStringSubmatch(string(usage), -1) {
		if !slices.Contains(completionSubcommands, m[1]) {
			t.Errorf("vipd -h names the subcommand %q, the completion does not (packaging/deb/vipd.bash-completion)", m[1])
		}
	}
	for _, sub := range completionSubcommands {
		cases = append(cases, tc{[]string{"vipd", sub, "-"}, append(flagNames(bin, sub), "-h")})
	}
	data, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := config.Parse(conf, data)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range cfg.VIPs {
		names = append(names, v.Name)
	}
	if len(names) < 2 {
		t.Fatalf("the packaged configuration has %d VIPs, the test wants two", len(names))
	}
	for _, sub := range []string{"drain", "weight", "enable", "disable"} {
		cases = append(cases, tc{[]string{"vipd", sub, "-config", conf, ""}, names})
	}
	cases = append(cases, tc{[]string{"vipd", "where", "-config", conf, "-port", "80", ""}, names})
	for _, v := range cfg.VIPs {
		var backends []string
		for _, b := range v.Backends {
			if b.Port != 0 {
				backends = append(backends, netip.AddrPortFrom(b.Address, b.Port).String())
			} else {
				backends = append(backends, b.Address.String())
			}
		}
		cases = append(cases, tc{[]string{"vipd", "drain", "-config", conf, "-undo", v.Name, ""}, backends})
	}

	// One bash for every case: each prints its words, a tab and what
	// the completion offers.
	var script strings.Builder
	fmt.Fprintf(&script, "source %s\nsource deb/vipd.bash-completion\nPATH=%s:$PATH\n", lib, filepath.Dir(bin))
	script.WriteString(`comp() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; COMPREPLY=(); _vipd; printf '%s\t%s\n' "$*" "${COMPREPLY[*]}"; }` + "\n")
	for _, c := range cases {
		script.WriteString("comp")
		for _, w := range c.words {
			fmt.Fprintf(&script, " '%s'", w)
		}
		script.WriteString("\n")
	}
	cmd := exec.Command("bash", "--norc", "--noprofile")
	cmd.Stdin = strings.NewReader(script.String())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(cases) {
		t.Fatalf("bash printed %d lines for %d cases:\n%s", len(lines), len(cases), out)
	}
	for i, c := range cases {
		_, got, _ := strings.Cut(lines[i], "\t")
		if got != strings.Join(c.want, " ") {
			t.Errorf("completing %q: got %q, want %q", strings.Join(c.words, " "), got, strings.Join(c.want, " "))
		}
	}
}
