package ratelog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestRepeatedWarningsLimited(t *testing.T) {
	var buf bytes.Buffer
	h := New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}), time.Minute)
	now := time.Unix(1000, 0)
	h.st.now = func() time.Time { return now }
	log := slog.New(h)
	for range 5 {
		log.Warn("host change refused", "err", "x")
		log.Info("info passes")
		log.Error("reload refused") // errors always pass
	}
	log.Warn("host change refused", "err", "y") // another condition
	log.Warn("host change refused", "err", "y")
	now = now.Add(time.Minute)
	log.Warn("host change refused", "err", "x")

	got := buf.String()
	want := []string{
		`level=WARN msg="host change refused" err=x`,
		`level=ERROR msg="reload refused"`,
		`level=ERROR msg="reload refused"`,
		`level=ERROR msg="reload refused"`,
		`level=ERROR msg="reload refused"`,
		`level=ERROR msg="reload refused"`,
		`level=WARN msg="host change refused" err=y`,
		`level=WARN msg="host change refused" err=x suppressed=4 suppressed_within=1m0s`,
	}
	var warns []string
	for _, l := range strings.Split(strings.TrimSpace(got), "\n") {
		if !strings.Contains(l, "info passes") {
			warns = append(warns, l)
		}
	}
	if strings.Join(warns, "\n") != strings.Join(want, "\n") {
		t.Errorf("log:\n%s\nwant the warnings:\n%s", got, strings.Join(want, "\n"))
	}
	if n := strings.Count(got, "info passes"); n != 5 {
		t.Errorf("%d info records passed, want all 5", n)
	}
}
