package health

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/health/tunprobe"
)

// Target is one backend to check.
type Target struct {
	Ref   uint32 // the backend's reference (control.Registry)
	VIP   string // for logs
	Label string // the backend as operators name it ("198.18.1.11:8080")
	// Addr is where the probe connects: the backend's own address and the
	// check port, or, for a probe through the tunnel, the VIP and the
	// check port.
	Addr  netip.AddrPort
	Check config.HealthCheck
	// Tunnel, when its Backend is valid, makes the probe a tunnel probe:
	// to Addr (the VIP) encapsulated to Tunnel.Backend as the VIP's
	// traffic is (probe = "tunnel").
	Tunnel tunprobe.Path
}

// TunnelDialer connects to a VIP through a backend's tunnel
// (*tunprobe.Prober).
type TunnelDialer interface {
	Dial(ctx context.Context, vip netip.AddrPort, path tunprobe.Path) (net.Conn, error)
}

// ErrNoTunnel is the result of a tunnel probe when no TunnelDialer was
// given.
var ErrNoTunnel = errors.New("health: tunnel probe without a tunnel prober")

// Prober runs one probe; the Manager uses Probe, tests inject their own.
type Prober func(ctx context.Context, t *Target) Result

// Probe runs t's check once: a TCP connect, or an HTTP GET that succeeds
// on 2xx and 3xx (redirects are not followed) and reports draining on the
// configured drain status (and header). A tunnel target fails with
// ErrNoTunnel: NewProber probes those.
func Probe(ctx context.Context, t *Target) Result { return probe(ctx, t, nil) }

// NewProber returns a Prober that runs Probe's checks, and dials the
// connections of tunnel targets through td.
func NewProber(td TunnelDialer) Prober {
	return func(ctx context.Context, t *Target) Result { return probe(ctx, t, td) }
}

// dialer is net.Dialer.DialContext's shape, which http.Transport takes.
type dialer func(ctx context.Context, network, addr string) (net.Conn, error)

func probe(ctx context.Context, t *Target, td TunnelDialer) Result {
	ctx, cancel := context.WithTimeout(ctx, t.Check.Timeout.D())
	defer cancel()
	var dial dialer
	if t.Tunnel.Backend.IsValid() {
		if td == nil {
			return Result{Err: ErrNoTunnel}
		}
		// Whatever address the HTTP client asks for, the connection is
		// the target's: VIP:port through the tunnel.
		dial = func(ctx context.Context, _, _ string) (net.Conn, error) { return td.Dial(ctx, t.Addr, t.Tunnel) }
	}
	switch t.Check.Type {
	case config.CheckTCP:
		if dial == nil {
			var d net.Dialer
			dial = d.DialContext
		}
		c, err := dial(ctx, "tcp", t.Addr.String())
		if err != nil {
			return Result{Err: err}
		}
		c.Close()
		return Result{OK: true}
	case config.CheckHTTP:
		client := httpClient
		if dial != nil {
			// A transport of its own: the shared one dials directly. No
			// keep-alive, so nothing outlives the probe.
			client = &http.Client{
				Transport:     &http.Transport{DisableKeepAlives: true, Proxy: nil, DialContext: dial},
				CheckRedirect: httpClient.CheckRedirect,
			}
		}
		return probeHTTP(ctx, t, client)
	}
	return Result{OK: true}
}

// httpClient is shared by all direct HTTP probes: no keep-alive (each
// probe is a fresh connection, as a client's would be), no redirects.
var httpClient = &http.Client{
	Transport:     &http.Transport{DisableKeepAlives: true, Proxy: nil},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func probeHTTP(ctx context.Context, t *Target, client *http.Client) Result {
	host := t.Addr.Addr().String()
	if t.Addr.Addr().Is6() {
		host = "[" + host + "]"
	}
	url := "http://" + host + ":" + strconv.Itoa(int(t.Addr.Port())) + t.Check.Path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Result{Err: err}
	}
	req.Header.Set("User-Agent", "vipd-healthcheck")
	resp, err := client.Do(req)
	if err != nil {
		return Result{Err: err}
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	hc := &t.Check
	var r Result
	if hc.LoadReport {
		r.Load, r.HasLoad, r.BadLoad = readLoad(resp.Header, hc.LoadHeader)
	}
	switch {
	case hc.DrainStatus != 0 && resp.StatusCode == hc.DrainStatus &&
		(hc.DrainHeader == "" || resp.Header.Get(hc.DrainHeader) != ""):
		r.OK, r.Draining = true, true
	case resp.StatusCode >= 200 && resp.StatusCode < 400:
		r.OK = true
	default:
		r.Err = fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return r
}

// jitter spreads probes: the first waits a random fraction of the
// interval, later ones the interval ±10%. r is in [0, 1).
func jitter(interval time.Duration, first bool, r float64) time.Duration {
	if first {
		return time.Duration(float64(interval) * r)
	}
	return time.Duration(float64(interval) * (0.9 + 0.2*r))
}
