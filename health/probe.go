package health

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/vipd/vipd/config"
)

// Target is one backend to check.
type Target struct {
	Ref   uint32 // the backend's reference (control.Registry)
	VIP   string // for logs
	Label string // the backend as operators name it ("198.18.1.11:8080")
	// Addr is where the probe connects: the backend's own address (also
	// for DSR, whose backends hold the VIP only on loopback) and the check
	// port.
	Addr  netip.AddrPort
	Check config.HealthCheck
}

// Prober runs one probe; the Manager uses Probe, tests inject their own.
type Prober func(ctx context.Context, t *Target) Result

// Probe runs t's check once: a TCP connect, or an HTTP GET that succeeds
// on 2xx and 3xx (redirects are not followed) and reports draining on the
// configured drain status (and header).
func Probe(ctx context.Context, t *Target) Result {
	ctx, cancel := context.WithTimeout(ctx, t.Check.Timeout.D())
	defer cancel()
	switch t.Check.Type {
	case config.CheckTCP:
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", t.Addr.String())
		if err != nil {
			return Result{Err: err}
		}
		c.Close()
		return Result{OK: true}
	case config.CheckHTTP:
		return probeHTTP(ctx, t)
	}
	return Result{OK: true}
}

// httpClient is shared by all HTTP probes: no keep-alive (each probe is a
// fresh connection, as a client's would be), no redirects.
var httpClient = &http.Client{
	Transport:     &http.Transport{DisableKeepAlives: true, Proxy: nil},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func probeHTTP(ctx context.Context, t *Target) Result {
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
	resp, err := httpClient.Do(req)
	if err != nil {
		return Result{Err: err}
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	hc := &t.Check
	if hc.DrainStatus != 0 && resp.StatusCode == hc.DrainStatus &&
		(hc.DrainHeader == "" || resp.Header.Get(hc.DrainHeader) != "") {
		return Result{OK: true, Draining: true}
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 400 {
		return Result{OK: true}
	}
	return Result{Err: fmt.Errorf("HTTP %d", resp.StatusCode)}
}

// jitter spreads probes: the first waits a random fraction of the
// interval, later ones the interval ±10%. r is in [0, 1).
func jitter(interval time.Duration, first bool, r float64) time.Duration {
	if first {
		return time.Duration(float64(interval) * r)
	}
	return time.Duration(float64(interval) * (0.9 + 0.2*r))
}
