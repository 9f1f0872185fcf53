package arp

import (
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vipd/vipd/testing/nstest"
	"github.com/vipd/vipd/testing/testkit"
)

// Privileged test helpers: a test bed of two throwaway network namespaces
// (testing/nstest), and running code inside one of them.

// do runs f inside ns and waits for it, at most 2*wait. f must not call
// t.FailNow (it is not on the test goroutine); t.Error is fine.
func do(t *testing.T, ns *nstest.NS, f func()) {
	t.Helper()
	start(t, ns, f)()
}

// start runs f inside ns (nstest's NS.Go) and returns a function that
// waits for f to return, at most 2*wait. Sockets f opens belong to ns;
// goroutines f starts run in the test's own namespace.
func start(t *testing.T, ns *nstest.NS, f func()) (join func()) {
	t.Helper()
	done := ns.Go(func() error { f(); return nil })
	var once sync.Once
	return func() {
		once.Do(func() {
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("namespace %s: %v", ns.Name, err)
				}
			case <-time.After(2 * wait):
				t.Errorf("code in namespace %s did not finish within %v", ns.Name, 2*wait)
			}
		})
	}
}

// testBed is two namespaces joined by a veth pair: A is the vipd box
// (vipd0), B a peer (peer0) on the same link. Addresses come from
// 198.18.0.0/15 and 2001:2::/48 only and exist only inside the namespaces.
type testBed struct {
	a, b       *nstest.NS
	macA, macB [6]byte
	ifA, ifB   string
}

const (
	bedMACA = "02:00:5e:0a:00:01"
	bedMACB = "02:00:5e:0b:00:01"
)

// newTestBed builds a testBed; it is torn down at cleanup. It returns once
// both ends of the link run (see nstest's WaitRunning: until then an
// end's frames are dropped without an error to the sender, and the
// Responder's first answer would never leave A).
func newTestBed(t *testing.T) *testBed {
	t.Helper()
	nstest.RequireRoot(t)
	bed := &testBed{
		a: nstest.New(t, "ara"), b: nstest.New(t, "arb"),
		macA: mustMAC(bedMACA), macB: mustMAC(bedMACB),
		ifA: "vipd0", ifB: "peer0",
	}
	nstest.VethWith(t, bed.a, bed.ifA, bed.b, bed.ifB, nstest.VethOptions{Rename: true, MACA: bedMACA, MACB: bedMACB})
	bed.a.AddAddrs(t, bed.ifA, netip.MustParsePrefix("198.18.0.1/24"), netip.MustParsePrefix("2001:2::1/64"))
	bed.b.AddAddrs(t, bed.ifB, netip.MustParsePrefix("198.18.0.2/24"), netip.MustParsePrefix("2001:2::2/64"))
	return bed
}

// neigh returns the neighbor entry for addr in ns as ip prints it.
func neigh(t *testing.T, ns *nstest.NS, ifname, addr string) string {
	t.Helper()
	return strings.TrimSpace(nstest.Must(t, "ip", "-n", ns.Name, "neigh", "show", addr, "dev", ifname))
}

// waitNeigh polls ns's neighbor table until addr's entry contains want,
// for at most wait. poke, when not nil, makes ns's kernel resolve addr:
// it is called first, and again whenever the entry has failed (the kernel
// gives up after three unanswered probes a second apart, which an answer
// delayed by a busy machine can miss, and does not ask again unprompted).
func waitNeigh(t *testing.T, ns *nstest.NS, ifname, addr, want string, poke func()) {
	t.Helper()
	if poke != nil {
		poke()
	}
	var got string
	ok := testkit.Poll(wait, func() bool {
		got = neigh(t, ns, ifname, addr)
		if strings.Contains(got, want) {
			return true
		}
		if poke != nil && strings.Contains(got, "FAILED") {
			poke()
		}
		return false
	})
	if !ok {
		t.Fatalf("neighbor %s in %s is %q after %v, want it to contain %q", addr, ns.Name, got, wait, want)
	}
}

// testLog sends the package's logs to the test log.
func testLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
