package sdnotify

import (
	"os"
	"strconv"
	"testing"
	"time"
)

func TestWatchdogPeriod(t *testing.T) {
	tests := []struct {
		name, usec, pid string
		want            time.Duration
		err             bool
	}{
		{"unset", "", "", 0, false},
		{"ours", "20000000", strconv.Itoa(os.Getpid()), 20 * time.Second, false},
		{"no pid", "3000000", "", 3 * time.Second, false},
		{"another process", "3000000", "1", 0, false},
		{"garbage", "x", "", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("WATCHDOG_USEC", tt.usec)
			t.Setenv("WATCHDOG_PID", tt.pid)
			got, err := WatchdogPeriod()
			if got != tt.want || (err != nil) != tt.err {
				t.Errorf("WatchdogPeriod() = %v, %v; want %v, error %v", got, err, tt.want, tt.err)
			}
		})
	}
}

func TestNilNotifier(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	n, err := FromEnv()
	if n != nil || err != nil {
		t.Fatalf("FromEnv() without NOTIFY_SOCKET = %v, %v; want nil, nil", n, err)
	}
	if err := n.Send("READY=1"); err != nil {
		t.Errorf("nil Send: %v", err)
	}
}
