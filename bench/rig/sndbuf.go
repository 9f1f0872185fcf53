package rig

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// GenSendBuffer is the send buffer trafgen's socket gets in the
// box-limited rows. A socket's buffer is sized from the root namespace's
// net.core.wmem_default when it is created (a namespace has no such
// setting, and SO_SNDBUF is capped by net.core.wmem_max). With the box's
// receive work on another CPU, up to a veth ring (256 frames) of skbs
// wait there, charged to trafgen's socket; at ~900 bytes each they
// overrun the default 212,992 bytes and trafgen aborts ("Flushing TX_RING
// failed: Resource temporarily unavailable").
const GenSendBuffer = 4 << 20

// WmemDefault raises a sysctl file (net.core.wmem_default) for as long as
// a program takes to create its socket and restores it at once. Raise and
// Restore hold an exclusive lock (flock) so that two runs on one machine
// never save each other's raised value as the original; a record file
// written before the value is raised lets the next run restore what a
// killed run left raised (Repair, done under the same lock).
type WmemDefault struct {
	Path, Lock, Record string

	mu       sync.Mutex
	lockf    *os.File
	orig     int
	raised   int
	closed   bool
	Repaired string // what Raise repaired, for the log
}

// NewWmemDefault is the guard of the real net.core.wmem_default.
func NewWmemDefault() *WmemDefault {
	dir := "/run"
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		dir = os.TempDir()
	}
	return &WmemDefault{
		Path:   "/proc/sys/net/core/wmem_default",
		Lock:   filepath.Join(dir, "vipd-bench-wmem_default.lock"),
		Record: filepath.Join(dir, "vipd-bench-wmem_default.saved"),
	}
}

// wmemRecord is what the record file holds: the value to restore, the
// value written and the writer's PID.
type wmemRecord struct{ Orig, Raised, PID int }

func (r wmemRecord) String() string { return fmt.Sprintf("%d %d %d\n", r.Orig, r.Raised, r.PID) }

func parseWmemRecord(s string) (wmemRecord, error) {
	f := strings.Fields(s)
	if len(f) != 3 {
		return wmemRecord{}, fmt.Errorf("wmem record %q: want 3 fields", s)
	}
	var v [3]int
	for i := range v {
		n, err := strconv.Atoi(f[i])
		if err != nil || n < 0 {
			return wmemRecord{}, fmt.Errorf("wmem record %q: bad field %q", s, f[i])
		}
		v[i] = n
	}
	return wmemRecord{v[0], v[1], v[2]}, nil
}

// repairValue decides what to write when a stale record is found: its
// original value, but only while the setting still holds the value that
// run wrote (anything else was set by someone else since, and stays).
func repairValue(current int, rec wmemRecord) (int, bool) {
	if current == rec.Raised && rec.Orig > 0 {
		return rec.Orig, true
	}
	return 0, false
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

func writeInt(path string, v int) error {
	return os.WriteFile(path, []byte(strconv.Itoa(v)+"\n"), 0o644)
}

// lock takes the exclusive lock, waiting up to 30 s.
func (w *WmemDefault) lock() error {
	f, err := os.OpenFile(w.Lock, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			w.lockf = f
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			return fmt.Errorf("lock %s: %w", w.Lock, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (w *WmemDefault) unlock() {
	if w.lockf != nil {
		unix.Flock(int(w.lockf.Fd()), unix.LOCK_UN)
		w.lockf.Close()
		w.lockf = nil
	}
}

// repair restores what a killed run left raised; the lock is held, so
// any record is stale.
func (w *WmemDefault) repair() error {
	b, err := os.ReadFile(w.Record)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	rec, err := parseWmemRecord(string(b))
	if err == nil {
		cur, err := readInt(w.Path)
		if err != nil {
			return err
		}
		if v, ok := repairValue(cur, rec); ok {
			if err := writeInt(w.Path, v); err != nil {
				return err
			}
			w.Repaired = fmt.Sprintf("restored %s to %d, left at %d by run %d", w.Path, v, cur, rec.PID)
		}
	}
	return os.Remove(w.Record)
}

// Raise saves the current value and writes value. Restore undoes it;
// after Restore (or on a guard already restored) Raise fails.
func (w *WmemDefault) Raise(value int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return errors.New("wmem_default guard already restored")
	}
	if w.raised != 0 {
		return errors.New("wmem_default already raised")
	}
	if err := w.lock(); err != nil {
		return err
	}
	err := func() error {
		if err := w.repair(); err != nil {
			return err
		}
		orig, err := readInt(w.Path)
		if err != nil {
			return err
		}
		if err := os.WriteFile(w.Record, []byte(wmemRecord{orig, value, os.Getpid()}.String()), 0o600); err != nil {
			return err
		}
		if err := writeInt(w.Path, value); err != nil {
			os.Remove(w.Record)
			return err
		}
		w.orig, w.raised = orig, value
		return nil
	}()
	if err != nil {
		w.unlock()
	}
	return err
}

// Restore writes back the saved value — unless someone else changed the
// setting meanwhile, which it then leaves and reports — and releases the
// lock. It is safe to call more than once and from a signal handler's
// cleanup while Raise runs (it waits for it).
func (w *WmemDefault) Restore() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if w.raised == 0 {
		return nil
	}
	defer w.unlock()
	raised := w.raised
	w.raised = 0
	cur, err := readInt(w.Path)
	if err != nil {
		return err
	}
	if cur != raised {
		os.Remove(w.Record)
		return fmt.Errorf("%s is %d, not the %d written: changed by someone else, left alone", w.Path, cur, raised)
	}
	if err := writeInt(w.Path, w.orig); err != nil {
		return err
	}
	return os.Remove(w.Record)
}

// RepairWmemDefault restores a value a killed run left raised; for the
// start of a run, next to nstest.SweepStale. It returns what it did ("" if
// nothing).
func RepairWmemDefault() (string, error) {
	w := NewWmemDefault()
	if err := w.lock(); err != nil {
		return "", err
	}
	defer w.unlock()
	err := w.repair()
	return w.Repaired, err
}
