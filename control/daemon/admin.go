package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/vipd/vipd/control/admin"
	"github.com/vipd/vipd/control/config"
)

// adminServers serve the admin API: read-only on TCP ([admin] listen), all
// of it on the Unix socket ([admin] socket).
type adminServers struct {
	servers   []*http.Server
	listeners []net.Listener
}

// listenAdmin binds the admin listeners and serves them; fail is called if
// one stops serving. Run calls it first: a second vipd started by mistake
// fails here, before it touches the XDP program of the first. Until the
// workers run, every request is answered 503 (Ready).
func (d *Daemon) listenAdmin(a *config.Admin, fail func(error)) (*adminServers, error) {
	s := &adminServers{}
	// Both listeners' /metrics show the TCP listener's refusals.
	hosts := admin.NewHostCheck(a.AllowedHosts, d.log)
	if a.Listen != "" {
		ln, err := net.Listen("tcp", a.Listen)
		if err != nil {
			return nil, fmt.Errorf("admin server: %w", err)
		}
		addr := ln.Addr().String()
		d.adminAddr.Store(&addr)
		s.serve(ln, hosts.Wrap(admin.Handler(d, admin.ReadOnly, hosts)), fail)
		d.log.Info("admin server listening (read-only)", "addr", addr, "allowed_hosts", a.AllowedHosts)
	}
	if a.Socket != "" {
		ln, err := listenSocket(a.Socket)
		if err != nil {
			s.shutdown()
			return nil, fmt.Errorf("admin socket: %w", err)
		}
		// No Host check here (see admin.HostCheck): a browser cannot
		// reach a Unix socket, and `vipd drain` names no real host.
		h := admin.Handler(d, admin.Control, hosts)
		if a.Pprof {
			// The socket only: its callers are trusted (see config.Admin).
			h = admin.WithPprof(h)
		}
		// Every change through the socket is logged with its caller
		// (SO_PEERCRED, put in by the server's ConnContext).
		h = admin.Audit(h, d.log, d.RecordEvent)
		s.serve(ln, h, fail)
		d.log.Info("admin socket listening", "path", a.Socket, "pprof", a.Pprof)
	}
	return s, nil
}

func (s *adminServers) serve(ln net.Listener, h http.Handler, fail func(error)) {
	// IdleTimeout: an idle keep-alive connection (any local user can open
	// them on the TCP listener) is closed, not kept for ever.
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute,
		ConnContext: admin.ConnContext} // a no-op on TCP connections
	s.servers = append(s.servers, srv)
	s.listeners = append(s.listeners, ln)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fail(fmt.Errorf("admin server on %s: %w", ln.Addr(), err))
		}
	}()
}

// shutdown stops the servers, letting requests in progress finish (for at
// most 2 s), and closes the listeners, which removes the socket file. It
// may be called more than once.
func (s *adminServers) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, srv := range s.servers {
		srv.Shutdown(ctx)
	}
	for _, ln := range s.listeners {
		ln.Close() // also if Serve has not started yet; closing twice is harmless
	}
}

// listenSocket listens on a Unix socket at path that only the user vipd
// runs as can use: its mode is 0600 from the moment it exists, and that
// is the authentication (as for wireguard-go's control API). Its
// directory is created (0755) if missing. A socket file nobody answers on,
// left by a vipd that did not stop cleanly, is replaced; one that answers
// belongs to a vipd that runs, and is an error. Closing the listener
// removes the file.
func listenSocket(path string) (*net.UnixListener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	// The umask is process-wide; this is the only file vipd creates while
	// it is narrowed, and for a moment only.
	old := syscall.Umask(0o077)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	syscall.Umask(old)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// removeStaleSocket removes the socket file at path if nobody answers on
// it, and fails if somebody does or if the file is not a socket.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%s exists and is not a socket: remove it, or set another [admin] socket", path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("%s answers: another vipd runs with this [admin] socket", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("%s: cannot tell whether another vipd uses it: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Ready implements admin.Provider: nil once the workers run.
func (d *Daemon) Ready() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.phase < phaseRunning:
		return errors.New("vipd is starting: its workers do not run yet")
	case d.phase > phaseRunning:
		return errors.New("vipd is stopping")
	case len(d.box.stalled) > 0:
		return fmt.Errorf("workers %v make no progress", d.box.stalled)
	case !d.firstRoundDoneLocked(time.Now()):
		return fmt.Errorf("vipd is starting: %d backends await their first health check (no new flows before it)", d.awaitingCountLocked())
	}
	return nil
}
