package bgp

import (
	"context"
	"fmt"
	"log/slog"
)

// gobgpLog is the handler GoBGP logs through. It passes GoBGP's warnings
// and errors on to vipd's log, drops the rest (every retry, every UPDATE),
// and taps the NOTIFICATIONs GoBGP sends and receives: a peer that refuses
// the session (a wrong AS, a bad hold time) shows no state change in GoBGP
// v4 — the OPEN is refused on the connection, before the FSM — and this
// log line is the only trace of it. They become the peer's last error, a
// counted event and a warning in vipd's log.
type gobgpLog struct {
	next   slog.Handler
	notify func(peer string, sent bool, code, subcode int)
	peer   string // the "Key" attribute GoBGP's peer loggers carry
}

func (h gobgpLog) Enabled(ctx context.Context, l slog.Level) bool {
	// Notifications are logged at info.
	return l >= slog.LevelInfo
}

func (h gobgpLog) Handle(ctx context.Context, r slog.Record) error {
	if sent, ok := notificationMsg[r.Message]; ok && h.peer != "" {
		code, subcode := -1, -1
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "Code":
				code = int(a.Value.Int64())
			case "Subcode":
				subcode = int(a.Value.Int64())
			}
			return true
		})
		h.notify(h.peer, sent, code, subcode)
		return nil
	}
	if r.Level < slog.LevelWarn || !h.next.Enabled(ctx, r.Level) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

var notificationMsg = map[string]bool{"sent notification": true, "received notification": false}

func (h gobgpLog) WithAttrs(as []slog.Attr) slog.Handler {
	for _, a := range as {
		if a.Key == "Key" {
			h.peer = a.Value.String()
		}
	}
	h.next = h.next.WithAttrs(as)
	return h
}

func (h gobgpLog) WithGroup(n string) slog.Handler {
	h.next = h.next.WithGroup(n)
	return h
}

// notificationText names a NOTIFICATION's error (RFC 4271 §4.5, RFC 4486).
func notificationText(code, subcode int) string {
	name := map[int]string{1: "message header error", 2: "OPEN message error", 3: "UPDATE message error",
		4: "hold timer expired", 5: "FSM error", 6: "cease"}[code]
	sub := ""
	switch code {
	case 2:
		sub = map[int]string{1: "unsupported version", 2: "bad peer AS", 3: "bad BGP identifier",
			4: "unsupported optional parameter", 6: "unacceptable hold time", 7: "unsupported capability"}[subcode]
	case 6:
		sub = map[int]string{1: "maximum prefixes reached", 2: "administrative shutdown", 3: "peer de-configured",
			4: "administrative reset", 5: "connection rejected", 6: "other configuration change",
			7: "connection collision resolution", 8: "out of resources"}[subcode]
	}
	switch {
	case name == "":
		return fmt.Sprintf("error code %d/%d", code, subcode)
	case sub == "":
		return fmt.Sprintf("%s (%d/%d)", name, code, subcode)
	}
	return fmt.Sprintf("%s: %s (%d/%d)", name, sub, code, subcode)
}
