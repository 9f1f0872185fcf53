package sdunit

import (
	"slices"
	"strings"
	"testing"
)

// TestRemovedOnStop: the directories systemd.exec(5) says a stop throws
// away, setting by setting.
func TestRemovedOnStop(t *testing.T) {
	for _, tt := range []struct {
		name, unit string
		want       []string // nil: an error
	}{
		{"nothing", "[Service]\nExecStart=/bin/true\nStateDirectory=vipd\n", []string{}},
		{"runtime directory", "[Service]\nRuntimeDirectory=vipd\n", []string{"/run/vipd"}},
		{"several, over lines, with a reset", "[Service]\nRuntimeDirectory=old\nRuntimeDirectory=\nRuntimeDirectory=a \\\n  b/c\n", []string{"/run/a", "/run/b/c"}},
		{"a symlink to it", "[Service]\nRuntimeDirectory=vipd:vipd-link\n", []string{"/run/vipd", "/run/vipd-link"}},
		{"preserved", "[Service]\nRuntimeDirectory=vipd\nRuntimeDirectoryPreserve=yes\n", []string{}},
		{"preserved across restarts only", "[Service]\nRuntimeDirectory=vipd\nRuntimeDirectoryPreserve=restart\n", []string{"/run/vipd"}},
		{"private tmp", "[Service]\nPrivateTmp=yes\n", []string{"/tmp", "/var/tmp"}},
		{"private tmp off", "[Service]\nPrivateTmp=on\nPrivateTmp=false\n", []string{}},
		{"dynamic user", "[Service]\nDynamicUser=1\n", []string{"/dev/mqueue", "/dev/shm", "/tmp", "/var/tmp"}},
		{"RemoveIPC as root: nothing", "[Service]\nRemoveIPC=yes\n", []string{}},
		{"RemoveIPC with a user", "[Service]\nUser=vipd\nRemoveIPC=yes\n", []string{"/dev/mqueue", "/dev/shm"}},
		{"temporary file system", "[Service]\nTemporaryFileSystem=/var:ro /srv\n", []string{"/srv", "/var"}},
		{"comments, spaces and other sections", "# c\n[Unit]\nRuntimeDirectory=not-here\n[Service]\n; c\n RuntimeDirectory = vipd \n", []string{"/run/vipd"}},
		{"a specifier", "[Service]\nRuntimeDirectory=%N\n", nil},
		{"an absolute runtime directory", "[Service]\nRuntimeDirectory=/run/vipd\n", nil},
		{"out of /run", "[Service]\nRuntimeDirectory=../etc\n", nil},
		{"not a boolean", "[Service]\nPrivateTmp=maybe\n", nil},
		{"bad preserve", "[Service]\nRuntimeDirectory=vipd\nRuntimeDirectoryPreserve=sometimes\n", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			u, err := Parse(strings.NewReader(tt.unit))
			if err != nil {
				t.Fatal(err)
			}
			got, err := u.RemovedOnStop()
			switch {
			case tt.want == nil && err == nil:
				t.Errorf("got %q, want an error", got)
			case tt.want != nil && err != nil:
				t.Errorf("error %v, want %q", err, tt.want)
			case tt.want != nil && !slices.Equal(got, tt.want):
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestParseRefuses: what is no unit file is an error, not a guess.
func TestParseRefuses(t *testing.T) {
	for _, unit := range []string{
		"RuntimeDirectory=vipd\n",
		"[Service\nRuntimeDirectory=vipd\n",
		"[Service]\nRuntimeDirectory vipd\n",
		"[Service]\nRuntimeDirectory=vipd \\\n",
	} {
		if _, err := Parse(strings.NewReader(unit)); err == nil {
			t.Errorf("Parse took %q", unit)
		}
	}
}

func TestWithin(t *testing.T) {
	for _, tt := range []struct {
		p, dir string
		want   bool
	}{
		{"/run/vipd/keepalived.state", "/run/vipd", true},
		{"/run/vipd", "/run/vipd/", true},
		{"/run/vipd/../vipd-keepalived/state", "/run/vipd", false},
		{"/run/vipd-keepalived/state", "/run/vipd", false},
		{"/run/vipd-keepalived/state", "/run", true},
		{"/tmp/x", "/var/tmp", false},
	} {
		if got := Within(tt.p, tt.dir); got != tt.want {
			t.Errorf("Within(%q, %q) = %v, want %v", tt.p, tt.dir, got, tt.want)
		}
	}
}
