package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/vipd/vipd/control/admin/api"
)

// SocketClient returns an HTTP client that sends every request to the
// admin socket at path, whatever the URL's host.
func SocketClient(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		DisableKeepAlives: true,
	}}
}

// SocketError explains a failure to reach the admin socket at path.
func SocketError(path string, err error) error {
	switch {
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("admin socket %s: permission denied: only the user vipd runs as may use it; run this as root (sudo)", path)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("admin socket %s does not exist: is vipd running, with this [admin] socket? (-config FILE reads it from the file vipd runs on)", path)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("admin socket %s: nobody answers: vipd is not running (the file is left by one that did not stop cleanly)", path)
	}
	return fmt.Errorf("admin socket %s: %w", path, err)
}

// postSocket POSTs body as JSON to path on the admin socket, within 15 s,
// and reads a 200 answer into into (nil: no body wanted).
func postSocket(ctx context.Context, socket, path string, body, into any) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	// The host is not used: every connection goes to the socket.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://vipd"+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := SocketClient(socket).Do(req)
	if err != nil {
		return SocketError(socket, err)
	}
	return answer(resp, into)
}

// FetchSocketState reads GET /v1/state over the admin socket.
func FetchSocketState(ctx context.Context, socket string) (*api.State, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://vipd/v1/state", nil)
	if err != nil {
		return nil, err
	}
	resp, err := SocketClient(socket).Do(req)
	if err != nil {
		return nil, SocketError(socket, err)
	}
	var st api.State
	return &st, answer(resp, &st)
}

// Drain asks vipd, through its admin socket (the path of [admin] socket),
// to drain (or undrain) a backend, for reason (may be ""). Only the user vipd runs as (root) may
// use the socket; the error says so.
func Drain(ctx context.Context, socket, vip, backend string, drain bool, reason string) error {
	return postSocket(ctx, socket, "/v1/drain", api.DrainRequest{VIP: vip, Backend: backend, Drain: &drain, Reason: reason}, nil)
}

// DrainBox asks the vipd on the admin socket at path to lame-duck the box
// (undo: to announce again).
func DrainBox(ctx context.Context, socket string, undo bool) (*api.BoxDrainAnswer, error) {
	var a api.BoxDrainAnswer
	return &a, postSocket(ctx, socket, "/v1/drain-box", api.BoxDrainRequest{Undo: undo}, &a)
}

// SetOverride sends req to the vipd on the admin socket at path.
func SetOverride(ctx context.Context, socket string, req api.OverrideRequest) (*api.OverrideAnswer, error) {
	var a api.OverrideAnswer
	return &a, postSocket(ctx, socket, "/v1/override", req, &a)
}

// Reload asks vipd, through its admin socket, to reload its configuration
// file. A refused reload is a result with OK false, not an error.
func Reload(ctx context.Context, socket string) (*api.ReloadResult, error) {
	// A reload that arrives while vipd starts waits for the start.
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://vipd/v1/reload", bytes.NewReader([]byte("{}")))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := SocketClient(socket).Do(req)
	if err != nil {
		return nil, SocketError(socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusUnprocessableEntity {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, errors.New(strings.TrimSpace(string(b)))
	}
	var res api.ReloadResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return nil, fmt.Errorf("admin socket %s: bad reload answer: %w", socket, err)
	}
	return &res, nil
}

// SetRole asks vipd, through its admin socket, to become active or
// standby.
func SetRole(ctx context.Context, socket, role string) (*api.RoleAnswer, error) {
	var a api.RoleAnswer
	return &a, postSocket(ctx, socket, "/v1/role", api.RoleRequest{Role: role}, &a)
}
