package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLocateAdmin: a client finds [admin] listen and socket in files that
// do not load — a value that does not validate, a syntax error before or
// after [admin] — and falls back to the defaults, saying why, only when
// the admin part itself cannot be read.
func TestLocateAdmin(t *testing.T) {
	const (
		sock   = "/run/vipd-a/admin.sock"
		listen = "127.0.0.1:9999"
	)
	admin := "[admin]\nlisten = \"" + listen + "\"\nsocket = \"" + sock + "\"\n"
	head := "[dataplane]\ningress = \"eth0\"\n"
	vip := "[[vip]]\nname = \"web\"\naddress = \"198.18.0.100\"\nport = 80\n[[vip.backend]]\naddress = \"198.18.1.11\"\n"
	for _, tc := range []struct {
		name         string
		src          string
		listen, sock string
		note         string // in Note; "" for none
	}{
		{"valid", head + admin + vip, listen, sock, ""},
		{"no [admin]", head + vip, DefaultAdminListen, DefaultAdminSocket, ""},
		{"one key", head + "[admin]\nsocket = \"" + sock + "\"\n" + vip, DefaultAdminListen, sock, ""},
		{"disabled", head + "[admin]\nlisten = \"\"\nsocket = \"\"\n", "", "", ""},
		{"semantic errors", strings.Replace(head, "eth0", "", 1) + admin + "[[vip]]\nname = \"web\"\nport = 99999\ncolour = \"red\"\n", listen, sock, ""},
		{"invalid admin values are not judged", head + "[admin]\nsocket = \"relative.sock\"\n", DefaultAdminListen, "relative.sock", ""},
		{"syntax error before", head + "queues = = 2\n" + admin + vip, listen, sock, ""},
		{"syntax error after", head + admin + vip + "[[vip]\nname = \"api\n", listen, sock, ""},
		{"duplicate table elsewhere", head + admin + head, listen, sock, ""},
		{"an array left open before", head + "interfaces = [\"eth0\",\n" + admin, listen, sock, ""},
		{"a multi-line string in the way", head + "note = \"\"\"\n[admin]\nsocket = \"/elsewhere\"\n\"\"\"\nqueues = = 1\n" + admin, listen, sock, ""},
		{"root dotted keys", "admin.socket = \"" + sock + "\"\n" + head + "queues = = 2\n", DefaultAdminListen, sock, ""},
		{"root inline table", "admin = { socket = \"" + sock + "\" }\n" + head + "queues = = 2\n", DefaultAdminListen, sock, ""},
		{"syntax error in [admin]", head + "[admin]\nsocket = \"" + sock + "\n" + vip + "queues = = 2\n", DefaultAdminListen, DefaultAdminSocket, "f.toml:4: [admin] does not parse"},
		{"broken [admin] header", head + "[admin\nsocket = \"" + sock + "\"\n" + vip, DefaultAdminListen, DefaultAdminSocket, "[admin] does not parse"},
		{"not a string", head + "[admin]\nlisten = \"" + listen + "\"\nsocket = 5\n", DefaultAdminListen, DefaultAdminSocket, "f.toml:5: admin.socket: must be a string, not 5"},
		{"not a table", "admin = 5\n" + head, DefaultAdminListen, DefaultAdminSocket, "f.toml:1: admin: must be a table"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep := locateAdmin("f.toml", tc.src)
			if ep.Listen != tc.listen || ep.Socket != tc.sock {
				t.Errorf("listen %q, socket %q; want %q, %q", ep.Listen, ep.Socket, tc.listen, tc.sock)
			}
			if tc.note == "" && ep.Note != "" || !strings.Contains(ep.Note, tc.note) {
				t.Errorf("note %q, want %q", ep.Note, tc.note)
			}
		})
	}
}

// TestLocateAdminFile: LocateAdmin reads the file; the only error is one
// it cannot read.
func TestLocateAdminFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vipd.toml")
	if err := os.WriteFile(path, []byte("[admin]\nsocket = \"/run/x.sock\"\n[[vip]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ep, err := LocateAdmin(path); err != nil || ep.Socket != "/run/x.sock" {
		t.Errorf("LocateAdmin: %+v, %v", ep, err)
	}
	if _, err := LocateAdmin(path + ".missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}
