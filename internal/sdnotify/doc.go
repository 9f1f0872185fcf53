// Package sdnotify speaks systemd's service notification protocol
// (sd_notify(3)): newline-separated VAR=value assignments such as READY=1,
// RELOADING=1, STOPPING=1 and WATCHDOG=1, each message one datagram to the
// AF_UNIX socket named by $NOTIFY_SOCKET ("@" first: an abstract socket).
// It also reads the watchdog period systemd passes in $WATCHDOG_USEC
// (sd_watchdog_enabled(3)).
//
// Without $NOTIFY_SOCKET (vipd not started by systemd, or Type= is not
// notify) FromEnv returns a nil *Notifier, whose Send does nothing, so
// that callers need no second code path.
package sdnotify
