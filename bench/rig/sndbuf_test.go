package rig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tempWmem is a guard over a file standing in for the sysctl.
func tempWmem(t *testing.T, value string) *WmemDefault {
	t.Helper()
	d := t.TempDir()
	w := &WmemDefault{Path: filepath.Join(d, "wmem_default"), Lock: filepath.Join(d, "lock"), Record: filepath.Join(d, "saved")}
	if err := os.WriteFile(w.Path, []byte(value), 0o644); err != nil {
		t.Fatal(err)
	}
	return w
}

func content(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestWmemRaiseRestore(t *testing.T) {
	w := tempWmem(t, "212992\n")
	if err := w.Raise(4 << 20); err != nil {
		t.Fatal(err)
	}
	if got := content(t, w.Path); got != "4194304" {
		t.Fatalf("raised to %s", got)
	}
	rec, err := parseWmemRecord(content(t, w.Record))
	if err != nil || rec.Orig != 212992 || rec.Raised != 4<<20 || rec.PID != os.Getpid() {
		t.Fatalf("record %+v, %v", rec, err)
	}
	if err := w.Raise(1 << 20); err == nil {
		t.Error("a second Raise must fail")
	}
	if err := w.Restore(); err != nil {
		t.Fatal(err)
	}
	if got := content(t, w.Path); got != "212992" {
		t.Errorf("restored to %s", got)
	}
	if _, err := os.Stat(w.Record); !os.IsNotExist(err) {
		t.Errorf("record left behind: %v", err)
	}
	if err := w.Restore(); err != nil {
		t.Errorf("a second Restore: %v", err)
	}
	if err := w.Raise(1 << 20); err == nil {
		t.Error("Raise after Restore must fail (a signal's cleanup ran first)")
	}
	if got := content(t, w.Path); got != "212992" {
		t.Errorf("value %s after a refused Raise", got)
	}
}

func TestWmemRestoreLeavesOthersValue(t *testing.T) {
	w := tempWmem(t, "212992")
	if err := w.Raise(4 << 20); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(w.Path, []byte("300000\n"), 0o644) // someone else
	if err := w.Restore(); err == nil {
		t.Error("Restore must report a value changed by someone else")
	}
	if got := content(t, w.Path); got != "300000" {
		t.Errorf("someone else's value overwritten: %s", got)
	}
}

func TestWmemRepair(t *testing.T) {
	for _, tc := range []struct {
		name, value, record string
		want                string // the value after the next Raise's repair, before it raises
	}{
		{"killed run left it raised", "4194304", "212992 4194304 999999999", "212992"},
		{"changed since by someone else", "500000", "212992 4194304 999999999", "500000"},
		{"garbage record", "212992", "nonsense", "212992"},
	} {
		w := tempWmem(t, tc.value)
		if err := os.WriteFile(w.Record, []byte(tc.record), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := w.Raise(1 << 22); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if err := w.Restore(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := content(t, w.Path); got != tc.want {
			t.Errorf("%s: value %s, want %s", tc.name, got, tc.want)
		}
		if _, err := os.Stat(w.Record); !os.IsNotExist(err) {
			t.Errorf("%s: record left behind", tc.name)
		}
	}
}

func TestRepairValue(t *testing.T) {
	for _, tc := range []struct {
		cur  int
		rec  wmemRecord
		want int
		ok   bool
	}{
		{4 << 20, wmemRecord{212992, 4 << 20, 1}, 212992, true},
		{212992, wmemRecord{212992, 4 << 20, 1}, 0, false},
		{4 << 20, wmemRecord{0, 4 << 20, 1}, 0, false},
	} {
		if v, ok := repairValue(tc.cur, tc.rec); v != tc.want || ok != tc.ok {
			t.Errorf("repairValue(%d, %+v) = %d, %v", tc.cur, tc.rec, v, ok)
		}
	}
	for _, bad := range []string{"", "1 2", "1 2 x", "-1 2 3", "1 2 3 4"} {
		if _, err := parseWmemRecord(bad); err == nil {
			t.Errorf("parseWmemRecord(%q) accepted", bad)
		}
	}
}
