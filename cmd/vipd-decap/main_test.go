package main

import (
	"bytes"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/vipd/vipd/internal/nstest"
)

// TestUsage drives the flags that stop before anything is opened, so it
// creates nothing even as root.
func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		out  string // expected in stdout+stderr
	}{
		{[]string{"-h"}, 0, "-allow"},
		{[]string{"-version"}, 0, "vipd-decap dev"},
		{[]string{"-bogus"}, 2, "flag provided but not defined"},
		{[]string{"extra"}, 2, `unexpected argument "extra"`},
		{[]string{"-allow", "198.18.1.1,nonsense"}, 2, "-allow"},
		{[]string{"-allow", "fe80::1%eth0"}, 2, "zone"},
		{[]string{"-stats-interval", "-1s"}, 2, "must not be negative"},
		{[]string{"-log-level", "loud"}, 2, "-log-level"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		out := stdout.String() + stderr.String()
		if code != tc.code || !strings.Contains(out, tc.out) {
			t.Errorf("run(%q) = %d, output %q; want %d and %q", tc.args, code, out, tc.code, tc.out)
		}
	}
}

func TestParsePrefixes(t *testing.T) {
	got, err := parsePrefixes(" 198.18.1.1, 198.18.4.7/22 ,2001:2::1,,2001:2:0:1::/64")
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{
		netip.MustParsePrefix("198.18.1.1/32"),
		netip.MustParsePrefix("198.18.4.0/22"),
		netip.MustParsePrefix("2001:2::1/128"),
		netip.MustParsePrefix("2001:2:0:1::/64"),
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got, err := parsePrefixes(""); err != nil || len(got) != 0 {
		t.Errorf("empty: %v, %v", got, err)
	}
}

// syncBuffer is a bytes.Buffer safe to read while a process writes it.
type syncBuffer struct {
	ch  chan struct{}
	buf bytes.Buffer
}

func newSyncBuffer() *syncBuffer {
	b := &syncBuffer{ch: make(chan struct{}, 1)}
	b.ch <- struct{}{}
	return b
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	<-b.ch
	defer func() { b.ch <- struct{}{} }()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	<-b.ch
	defer func() { b.ch <- struct{}{} }()
	return b.buf.String()
}

// waitFor polls cond every 20 ms for at most d.
func waitFor(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// TestBinary runs the built command in a throwaway namespace, as a
// backend would: it must fix rp_filter, decapsulate a packet, log its
// counters, and on SIGTERM exit 0 with the TUN device gone and the
// sysctl restored.
func TestBinary(t *testing.T) {
	nstest.RequireRoot(t)
	bin := filepath.Join(t.TempDir(), "vipd-decap")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ns := nstest.New(t, "dcap")
	// The backend's own address and the VIP, both on loopback: a packet
	// sent to the own address from inside the namespace is delivered
	// locally, as one arriving from vipd would be.
	be, vip := netip.MustParseAddr("198.18.1.11"), netip.MustParseAddr("198.18.0.101")
	ns.Must(t, "ip", "addr", "add", be.String()+"/32", "dev", "lo")
	ns.Must(t, "ip", "addr", "add", vip.String()+"/32", "dev", "lo")
	ns.Must(t, "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=1")

	const tun = "vtun-bin"
	log := newSyncBuffer()
	cmd := ns.Cmd(bin, "-tun", tun, "-fix-sysctls", "-check-local", "-allow", "198.18.1.1", "-stats-interval", "50ms")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		// Only if the test failed before the SIGTERM below: by PID.
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-exited
		}
	})
	hasTUN := func() bool {
		return exec.Command("ip", "-n", ns.Name, "link", "show", tun).Run() == nil
	}
	// "running" is logged once decap.New returned, that is after the raw
	// IPIP socket is open; the TUN exists earlier, and a packet sent in
	// between is lost (CI saw it once).
	if !waitFor(5*time.Second, func() bool { return strings.Contains(log.String(), "msg=running") }) {
		t.Fatalf("not running after 5s; log:\n%s", log)
	}
	if !hasTUN() {
		t.Fatalf("running without TUN %s; log:\n%s", tun, log)
	}

	// ip netns exec execs the command: cmd's PID is vipd-decap's.
	inner := serialize(t,
		&layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: net.IP{198, 18, 2, 7}, DstIP: vip.AsSlice()},
		&layers.TCP{SrcPort: 40000, DstPort: 80, SYN: true, Window: 1000})
	pkt := serialize(t,
		&layers.IPv4{Version: 4, TTL: 64, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolIPv4, SrcIP: net.IP{198, 18, 1, 1}, DstIP: be.AsSlice()},
		gopacket.Payload(inner))
	err := ns.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Sendto(fd, pkt, 0, &unix.SockaddrInet4{Addr: be.As4()})
	})
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	if !waitFor(5*time.Second, func() bool { return strings.Contains(log.String(), "decapsulated=1") }) {
		t.Fatalf("no decapsulated packet in the stats after 5s; log:\n%s", log)
	}
	if got := strings.TrimSpace(ns.Must(t, "sysctl", "-n", "net.ipv4.conf.all.rp_filter")); got != "0" {
		t.Errorf("while running: all.rp_filter = %s, want 0", got)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v; log:\n%s", err, log)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("still running 5s after SIGTERM; log:\n%s", log)
	}
	out := log.String()
	for _, want := range []string{"msg=running", "msg=\"final stats\"", "msg=stopped"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
	if hasTUN() {
		t.Errorf("TUN %s still there after exit", tun)
	}
	if got := strings.TrimSpace(ns.Must(t, "sysctl", "-n", "net.ipv4.conf.all.rp_filter")); got != "1" {
		t.Errorf("after exit: all.rp_filter = %s, want 1 (restored)", got)
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("log:\n%s", out)
	}
}

func serialize(tb testing.TB, ls ...gopacket.SerializableLayer) []byte {
	tb.Helper()
	if nl, ok := ls[0].(*layers.IPv4); ok && len(ls) > 1 {
		if tcp, ok := ls[1].(*layers.TCP); ok {
			tcp.SetNetworkLayerForChecksum(nl)
		}
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}
