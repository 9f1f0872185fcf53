package ratelog

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// maxKeys bounds the messages remembered; past it the memory is cleared
// (messages are constants in vipd, so it is not reached in practice).
const maxKeys = 1024

type state struct {
	mu    sync.Mutex
	every time.Duration
	now   func() time.Time
	// +checklocks:mu
	seen map[key]*entry
}

// key is a record's message and attributes: the same condition, not just
// the same kind of message (config warnings differ by their problem).
type key string

func keyOf(r slog.Record) key {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString("\x00" + a.String())
		return true
	})
	return key(b.String())
}

type entry struct {
	last       time.Time
	suppressed int
}

// Handler wraps another handler; see the package documentation.
type Handler struct {
	inner slog.Handler
	st    *state
}

// New returns a handler that passes a warning with a given message and
// attributes at most once per every to inner. Errors are never limited:
// each refused reload, say, must reach the log.
func New(inner slog.Handler, every time.Duration) *Handler {
	return &Handler{inner: inner, st: &state{every: every, now: time.Now, seen: map[key]*entry{}}}
}

// Enabled implements slog.Handler.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

// Handle implements slog.Handler.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level != slog.LevelWarn {
		return h.inner.Handle(ctx, r)
	}
	st := h.st
	st.mu.Lock()
	k := keyOf(r)
	e := st.seen[k]
	now := st.now()
	if e != nil && now.Sub(e.last) < st.every {
		e.suppressed++
		st.mu.Unlock()
		return nil
	}
	if e == nil {
		if len(st.seen) >= maxKeys {
			clear(st.seen)
		}
		e = &entry{}
		st.seen[k] = e
	}
	n := e.suppressed
	e.suppressed, e.last = 0, now
	st.mu.Unlock()
	if n > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int("suppressed", n), slog.Duration("suppressed_within", st.every))
	}
	return h.inner.Handle(ctx, r)
}

// WithAttrs implements slog.Handler; the result shares the rate limit.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Handler{inner: h.inner.WithAttrs(attrs), st: h.st}
}

// WithGroup implements slog.Handler; the result shares the rate limit.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{inner: h.inner.WithGroup(name), st: h.st}
}
