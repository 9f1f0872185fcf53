package daemon

import (
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/control"
	"github.com/vipd/vipd/health/outlier"
)

// TestEjectionsFollowTheBackend: a backend's ejection count is its own,
// not its ref's: when its ref goes to another backend (after the
// registry's hold), that backend starts at no ejection.
func TestEjectionsFollowTheBackend(t *testing.T) {
	td := newTestDaemon(t, testConfig, nil)
	clock := time.Unix(1e9, 0)
	td.d.reg.SetClock(func() time.Time { return clock })
	td.run()
	td.waitRunning()
	d := td.d
	d.mu.Lock()
	v := &d.cfg.VIPs[0]
	key := control.BackendKey(v, &v.Backends[0])
	ref := d.reg.Ref(key)
	d.outliers.det, d.outliers.ejected = outlier.New(), map[uint32]bool{}
	d.outliers.total = map[string]uint64{key: 2} // as two ejections leave it
	d.mu.Unlock()
	if got := d.Metrics().Ejections[ref]; got != 2 {
		t.Fatalf("ejections of %s (ref %d): %d, want 2", key, ref, got)
	}
	// The backend goes; past the hold another one comes, and gets its ref.
	without := strings.Replace(testConfig, "[[vip.backend]]\naddress = \"198.18.1.11\"\nport = 8080\n", "", 1)
	td.rewrite(without)
	if err := d.Reload(); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(d.reg.Hold() + time.Minute)
	td.rewrite(strings.Replace(testConfig, "198.18.1.11", "198.18.1.13", 1))
	if err := d.Reload(); err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	v = &d.cfg.VIPs[0]
	newKey := control.BackendKey(v, &v.Backends[0])
	newRef := d.reg.Ref(newKey)
	d.mu.Unlock()
	if newKey == key || newRef != ref {
		t.Fatalf("the test needs %s to take ref %d of %s: got %s, ref %d", newKey, ref, key, newKey, newRef)
	}
	if got, ok := d.Metrics().Ejections[ref]; ok {
		t.Errorf("%s inherited %d ejections of %s with its ref %d", newKey, got, key, ref)
	}
	// The count of a backend no longer configured goes at the next round.
	d.outlierRound(clock)
	d.mu.Lock()
	_, kept := d.outliers.total[key]
	d.mu.Unlock()
	if kept {
		t.Errorf("the ejections of %s, gone from the configuration, are still kept", key)
	}
}
