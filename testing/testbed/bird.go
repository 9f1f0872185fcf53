package testbed

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipd/vipd/testing/nstest"
	"github.com/vipd/vipd/testing/testkit"
)

// RequireBird skips the test unless BIRD 2 (Debian's bird2, which `make
// deps` installs when root) is there to play the upstream router.
func RequireBird(tb testing.TB) {
	tb.Helper()
	for _, p := range []string{"bird", "birdc"} {
		if _, err := exec.LookPath(p); err != nil {
			tb.Skipf("needs BIRD 2 as the upstream router (%s not found): run make test-deps as root, or apt-get install bird2", p)
		}
	}
}

// Bird is a BIRD 2 routing daemon running in a namespace of the bed.
type Bird struct {
	NS   *nstest.NS
	name string
	sock string
	bed  *Bed
}

// BirdPeer is one BGP neighbor of the router: a vipd box.
type BirdPeer struct {
	Name string
	Addr netip.Addr
	ASN  uint32
	// Password is the TCP MD5 key of the session ("": none).
	Password string
}

// BirdOptions shape the router's configuration.
type BirdOptions struct {
	ASN      uint32
	RouterID netip.Addr
	Peers    []BirdPeer
	// HoldTime in seconds (3 or more); 0: BIRD's default (240).
	HoldTime int
	// GracefulRestart makes the router keep a peer's routes for the
	// restart time it advertises when its session drops.
	GracefulRestart bool
}

// Config is the router's bird.conf: its BGP sessions import the boxes'
// routes (and export nothing), and its kernel protocol installs them,
// several equal paths merged into one ECMP route.
func (o BirdOptions) Config() string {
	var s strings.Builder
	fmt.Fprintf(&s, "log stderr all;\nrouter id %s;\nprotocol device { scan time 1; }\n", o.RouterID)
	s.WriteString("protocol kernel kernel4 {\n  ipv4 { import none; export all; };\n  merge paths yes;\n}\n")
	s.WriteString("protocol kernel kernel6 {\n  ipv6 { import none; export all; };\n  merge paths yes;\n}\n")
	for _, p := range o.Peers {
		fmt.Fprintf(&s, "protocol bgp %s {\n  local as %d;\n  neighbor %s as %d;\n  connect retry time 1;\n  error wait time 1, 3;\n", p.Name, o.ASN, p.Addr, p.ASN)
		if p.Password != "" {
			fmt.Fprintf(&s, "  password %q;\n", p.Password)
		}
		if o.HoldTime > 0 {
			fmt.Fprintf(&s, "  hold time %d;\n  keepalive time %d;\n", o.HoldTime, max(1, o.HoldTime/3))
		}
		if o.GracefulRestart {
			s.WriteString("  graceful restart on;\n")
		}
		s.WriteString("  ipv4 { import all; export none; };\n  ipv6 { import all; export none; };\n}\n")
	}
	return s.String()
}

// StartBird runs BIRD in ns with the configuration o; it is killed (by
// PID) at cleanup with the bed.
func (b *Bed) StartBird(ns *nstest.NS, o BirdOptions) *Bird {
	b.t.Helper()
	r := &Bird{NS: ns, name: nstest.Name("brd"), bed: b}
	conf := filepath.Join(b.dir, r.name+".conf")
	r.sock = filepath.Join(b.dir, r.name+".ctl")
	if err := os.WriteFile(conf, []byte(o.Config()), 0o644); err != nil {
		b.t.Fatalf("testbed: %v", err)
	}
	// -f: foreground, so that Spawn holds its PID; -d would also log to
	// stderr, -D file; the log is BIRD's own.
	b.Spawn(ns, r.name, "bird", "-f", "-c", conf, "-s", r.sock, "-P", filepath.Join(b.dir, r.name+".pid"))
	if !testkit.Poll(patience, func() bool { _, err := r.Cmd("show", "status"); return err == nil }) {
		b.t.Fatalf("testbed: BIRD did not come up:\n%s", b.Log(r.name))
	}
	return r
}

// Cmd runs a birdc command against the router and returns its output.
func (r *Bird) Cmd(args ...string) (string, error) {
	out, err := exec.Command("birdc", append([]string{"-s", r.sock}, args...)...).CombinedOutput()
	return string(out), err
}

// Log is BIRD's output so far.
func (r *Bird) Log() string { return r.bed.Log(r.name) }

// NextHops returns the next hops of the kernel's route to prefix in ns
// (the router's FIB), sorted as the kernel lists them; none when there is
// no such route.
func NextHops(ns *nstest.NS, prefix netip.Prefix) ([]netip.Addr, error) {
	fam := "-4"
	if prefix.Addr().Is6() {
		fam = "-6"
	}
	out, err := ns.Cmd("ip", fam, "route", "show", "exact", prefix.String()).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("ip route show: %v: %s", err, out)
	}
	var hops []netip.Addr
	f := strings.Fields(string(out))
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "via" {
			if f[i+1] == "inet6" && i+2 < len(f) {
				i++
			}
			if a, err := netip.ParseAddr(f[i+1]); err == nil {
				hops = append(hops, a)
			}
		}
	}
	return hops, nil
}
