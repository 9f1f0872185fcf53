package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestManPageDocumentsEveryKey generates vipd.toml(5) from
// config.toml.example: it fails when a key of the schema has no comment
// there to document it, and checks that each key is an entry of the page.
func TestManPageDocumentsEveryKey(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config.toml.example"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteManPage(&b, string(data), "test"); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, k := range schemaKeys() {
		entry := ".B " + roff(k.Path) + "\n"
		if k.Table {
			entry = ".SH [" + strings.ToUpper(roff(k.Path)) + "]\n"
		}
		if !strings.Contains(page, entry) {
			t.Errorf("the page has no entry %q", entry)
		}
	}
	// A key without a comment is refused.
	bare := regexp.MustCompile(`(?s)\[conntrack\]\n.*?\ncapacity =`).ReplaceAllString(string(data), "[conntrack]\ncapacity =")
	if err := WriteManPage(&b, bare, "test"); err == nil || !strings.Contains(err.Error(), "conntrack.capacity") {
		t.Errorf("conntrack.capacity without its comment: err = %v, want it named", err)
	}
}
