package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.toml")
	if err := os.WriteFile(bad, []byte("[dataplane]\nio = \"dpdk\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	noAdmin := filepath.Join(t.TempDir(), "noadmin.toml")
	if err := os.WriteFile(noAdmin, []byte("[dataplane]\ningress = \"eth0\"\n[admin]\nlisten = \"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		code       int
		out, errIn string
	}{
		{"check example", []string{"-check", "-config", "../../config.toml.example"}, 0, "VIP web-nat", ""},
		{"check shows backends", []string{"-check", "-config", "../../config.toml.example"}, 0, "198.18.1.11:8080", ""},
		{"check broken file", []string{"-check", "-config", bad}, 1, "", "bad.toml:2: dataplane.io"},
		{"check reports every error", []string{"-check", "-config", bad}, 1, "", "dataplane.ingress"},
		{"missing file", []string{"-check", "-config", "/nonexistent/vipd.toml"}, 1, "", "no such file"},
		{"no config", []string{}, 2, "", "-config FILE is required"},
		{"version", []string{"-version"}, 0, "vipd ", ""},
		{"help", []string{"-h"}, 0, "", "usage:"},
		{"unknown flag", []string{"-bogus"}, 2, "", "flag provided but not defined"},
		{"stray argument", []string{"-config", "x", "extra"}, 2, "", "unexpected argument"},
		{"status without a server", []string{"status", "-admin", "127.0.0.1:1"}, 1, "", "is vipd running"},
		{"status with a config without admin", []string{"status", "-config", noAdmin}, 1, "", "disables the admin server"},
		{"drain needs two arguments", []string{"drain", "web"}, 2, "", "usage: vipd drain"},
		{"where needs two arguments", []string{"where", "web"}, 2, "", "usage: vipd where"},
		{"where without a server", []string{"where", "-admin", "127.0.0.1:1", "web", "198.18.0.1:5"}, 1, "", "admin server"},
		{"bad log level", []string{"-config", "../../config.toml.example", "-log-level", "loud"}, 2, "", "-log-level"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.args, &stdout, &stderr)
			if code != tt.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, &stdout, &stderr)
			}
			if tt.out != "" && !strings.Contains(stdout.String(), tt.out) {
				t.Errorf("stdout lacks %q:\n%s", tt.out, &stdout)
			}
			if tt.errIn != "" && !strings.Contains(stderr.String(), tt.errIn) {
				t.Errorf("stderr lacks %q:\n%s", tt.errIn, &stderr)
			}
		})
	}
}
