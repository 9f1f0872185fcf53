package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/vipd/vipd/control/admin/api"
	"golang.org/x/sys/unix"
)

// Caller is who is at the other end of an admin socket connection, as
// the kernel says (SO_PEERCRED): the audit of every change made through
// the socket names it.
type Caller struct {
	UID, PID int
	// Comm is the process's command name (/proc/PID/comm), "" when it
	// exited before it was read.
	Comm string
}

// String is "uid 0 pid 1234 (vipd)".
func (c Caller) String() string {
	s := "uid " + strconv.Itoa(c.UID) + " pid " + strconv.Itoa(c.PID)
	if c.Comm != "" {
		s += " (" + c.Comm + ")"
	}
	return s
}

type callerKey struct{}

// ConnContext is an http.Server's ConnContext for the admin socket: it
// puts the peer's credentials of a Unix connection into the context of
// every request on it (CallerOf). Other connections pass as they are.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ctx
	}
	caller, err := peerCred(uc)
	if err != nil {
		return ctx
	}
	return context.WithValue(ctx, callerKey{}, caller)
}

// CallerOf returns the caller ConnContext stored in ctx.
func CallerOf(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// peerCred reads SO_PEERCRED of c, and the peer's command name.
func peerCred(c *net.UnixConn) (Caller, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Caller{}, err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Caller{}, err
	}
	if serr != nil {
		return Caller{}, fmt.Errorf("SO_PEERCRED: %w", serr)
	}
	caller := Caller{UID: int(cred.Uid), PID: int(cred.Pid)}
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(caller.PID) + "/comm"); err == nil {
		caller.Comm = strings.TrimSpace(string(b))
	}
	return caller, nil
}

// maxAuditBody bounds the request body Audit logs: the admin API's
// change requests are a few hundred bytes.
const maxAuditBody = 4 << 10

// Audit logs every request h serves that is not a read (POST, PUT,
// DELETE: a drain, an override, a reload, a role change) once it is
// answered: who made it (the socket peer's uid, pid and command name,
// when ConnContext put them in), the method and path, the request's body
// and the answer's status. For the admin socket, whose callers may
// change the balancer. record, when not nil, gets the same as an event
// (api.EventAdmin), with the request's reason as the event's.
func Audit(h http.Handler, log *slog.Logger, record func(api.Event)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			h.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(io.LimitReader(r.Body, maxAuditBody+1))
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		by := "unknown"
		if c, ok := CallerOf(r.Context()); ok {
			by = c.String()
		}
		shown := string(body)
		if len(body) > maxAuditBody {
			shown = string(body[:maxAuditBody]) + "…"
		}
		log.Info("admin change", "by", by, "method", r.Method, "path", r.URL.Path, "request", shown, "status", sw.status)
		if record != nil {
			var req struct {
				VIP     string `json:"vip"`
				Backend string `json:"backend"`
				Reason  string `json:"reason"`
			}
			json.Unmarshal(body, &req) // best effort: the event names what it can
			record(api.Event{Kind: api.EventAdmin, VIP: req.VIP, Backend: req.Backend, By: by, Reason: req.Reason,
				What: fmt.Sprintf("%s %s %s: %d %s", r.Method, r.URL.Path, shown, sw.status, http.StatusText(sw.status))})
		}
	})
}

// statusWriter keeps the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}
