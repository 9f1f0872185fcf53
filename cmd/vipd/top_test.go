package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vipd/vipd/control/admin/api"
)

// TestTop: vipd top -n 2 draws two frames (each after an ANSI clear) with
// the rates per VIP, backend and worker, drops by reason included.
func TestTop(t *testing.T) {
	st := sampleState()
	st.VIPs[0].Rates = api.Rates{PacketsPerSec: 1500, BytesPerSec: 2e6, NewFlowsPerSec: 12}
	st.VIPs[0].ActiveFlows = 42
	st.VIPs[0].Backends[0].Rates = api.Rates{PacketsPerSec: 1500}
	st.WorkersDetail = []api.WorkerState{{Queue: 0, RxPerSec: 900, TxPerSec: 880, DropsPerSec: map[string]float64{"no_backend": 20}}, {Queue: 1, RxPerSec: 600, TxPerSec: 600}}
	addr := fakeAdmin(t, st)
	var out, errb bytes.Buffer
	if rc := run([]string{"top", "-n", "2", "-interval", "10ms", "-admin", addr}, &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	s := out.String()
	if n := strings.Count(s, clearScreen); n != 2 {
		t.Errorf("%d frames, want 2:\n%s", n, s)
	}
	frame := s[strings.LastIndex(s, clearScreen):]
	for _, want := range []string{"198.18.0.10:80", "1500", "2.0M", "12", "42", "198.18.1.11:8080", "no_backend 20", "900", "880"} {
		if !strings.Contains(frame, want) {
			t.Errorf("frame lacks %q:\n%s", want, frame)
		}
	}
	out.Reset()
	if rc := run([]string{"status", "-rate", "-admin", addr}, &out, &errb); rc != 0 || !strings.Contains(out.String(), "PktPS") ||
		!strings.Contains(out.String(), "1500") {
		t.Errorf("status -rate rc %d:\n%s", rc, out.String())
	}
}
