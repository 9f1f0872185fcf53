package testbed

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vipd/vipd/internal/sdunit"
	"github.com/vipd/vipd/testing/testkit"
)

// RemovedOnStop lists the directories systemd removes whenever the
// shipped vipd.service (packaging/deb/vipd.service) stops, as the unit
// says (sdunit.Unit.RemovedOnStop).
func RemovedOnStop() ([]string, error) {
	root, err := testkit.ModuleRoot()
	if err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(root, "packaging/deb/vipd.service"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	unit, err := sdunit.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("vipd.service: %w", err)
	}
	return unit.RemovedOnStop()
}

// StopUnit stops vipd in box i as `systemctl stop vipd` (and so a
// restart, or an upgrade) does: SIGTERM, a wait for vipd to exit, then
// the removal of every directory the shipped unit has systemd remove on
// a stop, in the box's stand-ins for them (BoxPath). A vipd started
// after it recreates its socket's directory itself, as it does without
// systemd.
func (e *ECMPBed) StopUnit(i int, v *VIPD) error {
	if err := v.Stop(); err != nil {
		return err
	}
	dirs, err := RemovedOnStop()
	if err != nil {
		return err
	}
	root := e.BoxPath(i, "/")
	for _, d := range dirs {
		p := e.BoxPath(i, d)
		if !strings.HasPrefix(p, root+string(filepath.Separator)) {
			return fmt.Errorf("testbed: %s maps to %s, outside box %d's root %s", d, p, i, root)
		}
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	return nil
}

// RestartUnit restarts vipd in box i on cfg as `systemctl restart vipd`
// does (StopUnit, then StartBox), and says for how long no vipd
// answered: from the SIGTERM until the new one's admin API answers.
func (e *ECMPBed) RestartUnit(i int, v *VIPD, cfg string) (*VIPD, time.Duration) {
	e.t.Helper()
	t0 := time.Now()
	if err := e.StopUnit(i, v); err != nil {
		e.t.Fatalf("testbed: stopping vipd in box %d: %v", i, err)
	}
	v = e.StartBox(i, cfg)
	return v, time.Since(t0)
}
