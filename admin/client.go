package admin

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
	"net/url"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/vipd/vipd/admin/api"
)

// FetchState gets /v1/state from the admin server at addr (host:port).
func FetchState(ctx context.Context, addr string) (*api.State, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/state", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("admin server at %s: %w (is vipd running, and is [admin] listen this address?)", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("admin server at %s: %s: %s", addr, resp.Status, strings.TrimSpace(string(b)))
	}
	var st api.State
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("admin server at %s: bad state: %w", addr, err)
	}
	return &st, nil
}

// Drain asks vipd, through its admin socket (the path of [admin] socket),
// to drain (or undrain) a backend. Only the user vipd runs as (root) may
// use the socket; the error says so.
func Drain(ctx context.Context, socket, vip, backend string, drain bool) error {
	return postSocket(ctx, socket, "/v1/drain", api.DrainRequest{VIP: vip, Backend: backend, Drain: &drain}, nil)
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

// answer reads an admin server's reply into into (nil: no body wanted) and
// closes it; a status other than 200 is an error with the server's text.
func answer(resp *http.Response, into any) error {
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return errors.New(strings.TrimSpace(string(b)))
	}
	if into == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(into)
}

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

// WriteStatus prints st like `ipvsadm -Ln`: one line per VIP, one per
// backend with its weight, state and flows.
func WriteStatus(w io.Writer, st *api.State) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "vipd %s  io %s  workers %d  config %s (loaded %s)  snapshot %d\n",
		st.Version, st.IO, st.Workers, st.ConfigFile, st.LoadedAt.Format(time.RFC3339), st.Generation)
	writeConfigNotice(tw, st)
	fast := "off"
	if st.FastPath {
		fast = "on"
	}
	role := ""
	if st.Role != "" {
		role = "  role " + st.Role
		if st.Role == api.RoleStandby {
			role += " (answers no ARP/NDP for its VIPs: vipd active)"
		}
	}
	fmt.Fprintf(tw, "conntrack %d/%d flows  XDP fast path %s%s\n", st.Conntrack.Entries, st.Conntrack.Capacity, fast, role)
	fmt.Fprintf(tw, "Prot\tVIP:Port\tMode\tScheduler\tFlags\t\t\t\n")
	fmt.Fprintf(tw, "  ->\tBackend:Port\tWeight\tForward\tHealth\tActiveFlows\tNewFlows\tPackets\tWhy\n")
	for _, v := range st.VIPs {
		flags := v.FlowHash
		if v.AllDown {
			flags += ",ALL-DOWN(" + v.OnAllDown + ")"
		}
		if v.Announce != "" {
			flags += ",bgp " + v.Announce
		}
		if !v.PreviousUntil.IsZero() {
			flags += ",previous-owner until " + v.PreviousUntil.Format(time.RFC3339)
		}
		if q := v.QUICLB; q != nil {
			flags += ",quic-lb " + q.Summary()
		}
		sched := v.Scheduler
		if sched == "" {
			sched = "maglev"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s M=%d\t%s\t\t\t\n", strings.ToUpper(v.Protocol), api.HostPort(v.Address, v.Port), v.Mode, sched, v.TableSize, flags)
		for _, b := range v.Backends {
			fwd := b.Forwarding
			if b.Drained {
				fwd += "(drain)"
			}
			if b.SlowStart > 0 && b.SlowStart < 1 {
				fwd += fmt.Sprintf("(ramp %.0f%%)", 100*b.SlowStart)
			}
			if b.Load > 0 && b.Load < 1 {
				fwd += fmt.Sprintf("(load: weight %.0f%%)", 100*b.Load)
			}
			fwd += overrideMark(&b)
			port := b.Port
			if port == 0 {
				port = v.Port
			}
			fmt.Fprintf(tw, "  ->\t%s\t%d\t%s\t%s\t%d\t%d\t%d\t%s\n", api.HostPort(b.Address, port), b.Weight, fwd, healthCell(b, time.Now()), b.ActiveFlows, b.NewFlows, b.Packets, b.LastError)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeOverrides(w, st)
	writeBGP(w, st)
	return nil
}

// Where asks the admin server at addr which backend a new flow would get.
func Where(ctx context.Context, addr, vip, client string, port uint16) (*api.WhereAnswer, error) {
	u := fmt.Sprintf("http://%s/v1/where?vip=%s&client=%s&port=%d", addr, url.QueryEscape(vip), url.QueryEscape(client), port)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("admin server at %s: %w", addr, err)
	}
	var a api.WhereAnswer
	return &a, answer(resp, &a)
}
