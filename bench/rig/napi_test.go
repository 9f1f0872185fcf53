package rig

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/vipd/vipd/testing/nstest"
)

func TestNAPIThreadName(t *testing.T) {
	for _, tc := range []struct {
		dev  string
		id   uint32
		want string
	}{
		{"eth0", 8193, "napi/eth0-8193"},
		{"eth0", 7, "napi/eth0-7"},
		{"longername0", 123456, "napi/longername"}, // cut to a comm's 15 bytes
	} {
		if got := NAPIThreadName(tc.dev, tc.id); got != tc.want {
			t.Errorf("NAPIThreadName(%q, %d) = %q, want %q", tc.dev, tc.id, got, tc.want)
		}
	}
}

// TestThreadedNAPI turns on GRO on a veth (which gives it NAPI), switches
// it to threaded NAPI and checks that the kthread the rig finds carries
// the kernel's name for it and is pinned where asked.
func TestThreadedNAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	nstest.RequireRoot(t)
	a, b := nstest.New(t, "na"), nstest.New(t, "nb")
	veth(t, a, "x0", b, "x1", 1)
	EnableGRO(t, b, "x1")
	pids := ThreadedNAPI(t, b, "x1", 0)
	napis, err := ListNAPI(b, "x1")
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) != 1 || len(napis) != 1 || napis[0].PID != pids[0] {
		t.Fatalf("pids %v, napis %+v", pids, napis)
	}
	st, err := ReadTaskStat(pids[0])
	if err != nil {
		t.Fatal(err)
	}
	if want := NAPIThreadName("x1", napis[0].ID); st.Comm != want {
		t.Errorf("kthread %d is %q, want %q", pids[0], st.Comm, want)
	}
	if got := kthreadByName(st.Comm); got != pids[0] {
		t.Errorf("kthreadByName(%q) = %d, want %d", st.Comm, got, pids[0])
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pids[0]) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(status), "Cpus_allowed_list:\t0\n") {
		t.Errorf("kthread not pinned to CPU 0:\n%s", status)
	}
}
