package sdnotify

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"
)

// Notifier sends notifications to the service manager. A nil *Notifier is
// valid and sends nothing. Send is safe for concurrent use.
type Notifier struct {
	conn *net.UnixConn
}

// FromEnv returns a Notifier for $NOTIFY_SOCKET, or nil when it is unset.
// It unsets nothing: vipd starts no children that could inherit it.
func FromEnv() (*Notifier, error) {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return nil, nil
	}
	return Dial(path)
}

// Dial returns a Notifier for the socket at path; a leading "@" names an
// abstract socket.
func Dial(path string) (*Notifier, error) {
	if path[0] == '@' {
		path = "\x00" + path[1:]
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return nil, fmt.Errorf("NOTIFY_SOCKET: %w", err)
	}
	return &Notifier{conn: conn}, nil
}

// Send sends one message, for example "READY=1\nSTATUS=running".
func (n *Notifier) Send(state string) error {
	if n == nil {
		return nil
	}
	_, err := n.conn.Write([]byte(state))
	return err
}

// Close closes the socket.
func (n *Notifier) Close() error {
	if n == nil {
		return nil
	}
	return n.conn.Close()
}

// Reloading is the message that starts a reload: RELOADING=1 with the
// CLOCK_MONOTONIC time systemd 253+ wants for Type=notify-reload. READY=1
// ends the reload.
func Reloading() string {
	return "RELOADING=1\nMONOTONIC_USEC=" + strconv.FormatInt(monotonicUsec(), 10)
}

// WatchdogPeriod returns the watchdog timeout systemd set for this process
// ($WATCHDOG_USEC, when $WATCHDOG_PID is unset or this process's pid), or
// 0 when there is none. Send WATCHDOG=1 at least twice per period.
func WatchdogPeriod() (time.Duration, error) {
	s := os.Getenv("WATCHDOG_USEC")
	if s == "" {
		return 0, nil
	}
	if p := os.Getenv("WATCHDOG_PID"); p != "" && p != strconv.Itoa(os.Getpid()) {
		return 0, nil // meant for another process
	}
	us, err := strconv.ParseInt(s, 10, 64)
	if err != nil || us <= 0 {
		return 0, errors.New("WATCHDOG_USEC: not a positive number: " + strconv.Quote(s))
	}
	return time.Duration(us) * time.Microsecond, nil
}
