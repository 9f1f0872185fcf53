package admin

import (
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// HostCheck guards the TCP listener against DNS rebinding: a web page
// whose name its owner points at 127.0.0.1 is, to the browser, the same
// origin as the listener, so without this check its scripts could read
// /v1/state and /metrics. The browser still sends the page's name in the
// Host header, which is what is checked: a request is served only when its
// Host is an IP literal (IPv4, or IPv6 in brackets), localhost, or a name
// the operator listed ([admin] allowed_hosts), each with or without a port,
// names case-insensitively. A page cannot make a browser send an IP literal
// or localhost as Host without being served from that very address.
//
// A request with no Host at all (HTTP/1.0; HTTP/1.1 requires one) or an
// empty one is refused too: no client worth serving omits it (curl, Go's
// client and Prometheus always send one), and serving it would let any
// client that can avoid naming a host past the check.
//
// The Unix socket needs no such check: a browser cannot connect to one,
// and its file mode already limits it to the user vipd runs as.
type HostCheck struct {
	// allowed holds the listed names, lower-cased and without a
	// trailing dot. It is never changed after NewHostCheck.
	allowed map[string]bool
	log     *slog.Logger
	refused atomic.Uint64
	now     func() time.Time // time.Now; tests replace it

	mu sync.Mutex
	// lastLog is when a refusal was last logged; unlogged counts the
	// refusals since, which the next log line reports.
	lastLog  time.Time
	unlogged uint64
}

// refusedLogEvery bounds the log lines about refused requests: a page that
// retries in a loop must not flood the journal. The counter counts all.
const refusedLogEvery = time.Minute

// NewHostCheck returns a check that accepts, besides IP literals and
// localhost, the names in allowed (host names as config validates them:
// no port, scheme or path). Refusals are logged to log, at most once per
// minute.
func NewHostCheck(allowed []string, log *slog.Logger) *HostCheck {
	hc := &HostCheck{allowed: make(map[string]bool, len(allowed)), log: log, now: time.Now}
	for _, name := range allowed {
		hc.allowed[normalName(name)] = true
	}
	return hc
}

// normalName is the form names are compared in: DNS names are
// case-insensitive, and "name." is the same name as "name".
func normalName(name string) string {
	return strings.ToLower(strings.TrimSuffix(name, "."))
}

// Allowed reports whether a request with this Host header (host, host:port
// or [v6]:port, as net/http's Request.Host holds it) is served.
func (hc *HostCheck) Allowed(host string) bool {
	name, ok := splitHost(host)
	if !ok {
		return false
	}
	if strings.HasPrefix(host, "[") {
		// splitHost took the brackets off: only an IPv6 literal goes
		// inside them.
		ip, err := netip.ParseAddr(name)
		return err == nil && ip.Is6()
	}
	if ip, err := netip.ParseAddr(name); err == nil && ip.Is4() {
		return true
	}
	name = normalName(name)
	return name == "localhost" || hc.allowed[name]
}

// splitHost returns the host of a Host header without its port and
// brackets. It fails on an empty host, a port that is not a number and on
// an IPv6 address outside brackets.
func splitHost(host string) (string, bool) {
	name, port := host, ""
	if strings.HasPrefix(host, "[") {
		end := strings.IndexByte(host, ']')
		if end < 0 {
			return "", false
		}
		name, port = host[1:end], host[end+1:]
		if port != "" && port[0] != ':' {
			return "", false
		}
	} else if i := strings.IndexByte(host, ':'); i >= 0 {
		name, port = host[:i], host[i:]
	}
	if port != "" {
		port = port[1:]
		// An empty port ("localhost:") is legal in a URI's authority.
		if len(port) > 5 || strings.Trim(port, "0123456789") != "" {
			return "", false
		}
	}
	return name, name != ""
}

// Wrap returns h behind the check. A refused request is answered before
// h sees it, so that a page learns nothing from it, not even whether
// vipd is ready (h's 503).
//
// The answer is 421 Misdirected Request, not 403 Forbidden: the request
// names an authority this server does not serve, which no credential
// would change (RFC 9110 §15.5.20); and it keeps the refusal apart from
// the 403 this listener gives to changes, which are served on the socket.
func (hc *HostCheck) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hc.Allowed(r.Host) {
			h.ServeHTTP(w, r)
			return
		}
		hc.refuse(r)
		http.Error(w, "vipd's admin listener serves requests for an IP address or localhost only; "+
			"add other names it is reached by to [admin] allowed_hosts", http.StatusMisdirectedRequest)
	})
}

// maxLoggedHost bounds the Host logged: it is the client's to choose.
const maxLoggedHost = 128

func (hc *HostCheck) refuse(r *http.Request) {
	hc.refused.Add(1)
	if hc.log == nil {
		return
	}
	hc.mu.Lock()
	now := hc.now()
	if !hc.lastLog.IsZero() && now.Sub(hc.lastLog) < refusedLogEvery {
		hc.unlogged++
		hc.mu.Unlock()
		return
	}
	suppressed := hc.unlogged
	hc.lastLog, hc.unlogged = now, 0
	hc.mu.Unlock()
	host := r.Host
	if len(host) > maxLoggedHost {
		host = host[:maxLoggedHost] + "..."
	}
	hc.log.Warn("admin request refused: its Host is not an IP address, localhost or in [admin] allowed_hosts (a DNS rebinding attempt, or a name to add there)",
		"host", host, "remote", r.RemoteAddr, "path", r.URL.Path, "suppressed", suppressed)
}

// Refused is the number of requests refused so far.
func (hc *HostCheck) Refused() uint64 { return hc.refused.Load() }

var dRefused = desc("admin_requests_refused_total", "Requests the admin TCP listener refused, by reason: host, a Host header that is not an IP address, localhost or in [admin] allowed_hosts (answered 421).", "reason")

// Describe and Collect make the check a Prometheus collector of its
// counter, for Handler's extra collectors.
func (hc *HostCheck) Describe(ch chan<- *prometheus.Desc) { ch <- dRefused }

func (hc *HostCheck) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(dRefused, prometheus.CounterValue, float64(hc.refused.Load()), "host")
}
