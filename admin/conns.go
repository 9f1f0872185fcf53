package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"
)

// Connection listing limits: a listing copies at most the limit asked for
// (DefaultConnsLimit when none) and never more than MaxConnsLimit flows
// per worker, so that its memory is bounded whatever the table's size.
const (
	DefaultConnsLimit = 1000
	MaxConnsLimit     = 100_000
)

// ConnsQuery selects the flows GET /v1/conns lists: each non-empty field
// is a filter, all must match.
type ConnsQuery struct {
	VIP     string // a VIP's name, or its address[:port]
	Client  string // ADDR or ADDR:PORT
	Backend string // ADDR or ADDR:PORT
	Limit   int    // 0: DefaultConnsLimit; capped at MaxConnsLimit
}

// Conn is one pinned flow, as `vipd conns` shows it.
type Conn struct {
	Protocol string `json:"protocol"` // tcp, udp, or the protocol number
	Client   string `json:"client"`   // ADDR:PORT
	VIP      string `json:"vip"`      // the VIP's name
	// VIPAddress is the VIP's address and the port the client sent to.
	VIPAddress string `json:"vip_address"`
	Backend    string `json:"backend"` // ADDR[:PORT]; "?" when the backend is gone
	State      string `json:"state"`   // the conntrack state (SynSent, Established, UDP, ...)
	// AgeSeconds is how long ago the flow was first seen, IdleSeconds how
	// long ago its last packet was (whole seconds, the table's clock).
	AgeSeconds  int64 `json:"age_seconds"`
	IdleSeconds int64 `json:"idle_seconds"`
	// FastPath is "off" (vipd runs no XDP fast path), "no" (the flow's
	// state or VIP keeps it in the workers) or "eligible" (the workers
	// hand it down; whether the kernel map holds it now is not known).
	FastPath string `json:"fast_path"`
	// Previous is the previous owner the flow's packets name in their
	// hint (DSR with a previous table), if any.
	Previous string `json:"previous,omitempty"`
}

// Conns is the answer of GET /v1/conns.
type Conns struct {
	Conns []Conn `json:"conns"`
	Limit int    `json:"limit"`
	// Truncated is set when the limit was reached: more flows match.
	Truncated bool `json:"truncated"`
}

// ConnsProvider is what a Provider implements to serve GET /v1/conns; a
// provider without it answers 501.
type ConnsProvider interface {
	Conns(ctx context.Context, q ConnsQuery) (*Conns, error)
}

// handleConns serves GET /v1/conns?vip=&client=&backend=&limit=.
func handleConns(p Provider) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		cp, ok := p.(ConnsProvider)
		if !ok {
			http.Error(w, "this server lists no connections", http.StatusNotImplemented)
			return
		}
		q := r.URL.Query()
		cq := ConnsQuery{VIP: q.Get("vip"), Client: q.Get("client"), Backend: q.Get("backend")}
		if ls := q.Get("limit"); ls != "" {
			n, err := strconv.Atoi(ls)
			if err != nil || n < 1 {
				http.Error(w, fmt.Sprintf("limit must be 1..%d", MaxConnsLimit), http.StatusBadRequest)
				return
			}
			cq.Limit = n
		}
		cq.Limit = ConnsLimit(cq.Limit)
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		ans, err := cp.Conns(ctx, cq)
		if err != nil {
			code := http.StatusBadRequest
			switch {
			case errors.Is(err, ErrNotFound):
				code = http.StatusNotFound
			case ctx.Err() != nil:
				code = http.StatusServiceUnavailable
			}
			http.Error(w, err.Error(), code)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(ans)
	}
}

// ConnsLimit is the limit a listing asked for n uses.
func ConnsLimit(n int) int {
	if n <= 0 {
		return DefaultConnsLimit
	}
	return min(n, MaxConnsLimit)
}

// FetchConns gets /v1/conns from the admin server at addr (host:port).
func FetchConns(ctx context.Context, addr string, q ConnsQuery) (*Conns, error) {
	ctx, cancel := context.WithTimeout(ctx, 35*time.Second)
	defer cancel()
	v := url.Values{}
	for k, s := range map[string]string{"vip": q.VIP, "client": q.Client, "backend": q.Backend} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	u := "http://" + addr + "/v1/conns"
	if len(v) > 0 {
		u += "?" + v.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("admin server at %s: %w (is vipd running, and is [admin] listen this address?)", addr, err)
	}
	var c Conns
	if err := answer(resp, &c); err != nil {
		return nil, fmt.Errorf("admin server at %s: %w", addr, err)
	}
	return &c, nil
}

// WriteConns prints c like `ipvsadm -Lnc`: one line per flow.
func WriteConns(w io.Writer, c *Conns) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROTO\tCLIENT\tVIP\tBACKEND\tSTATE\tAGE\tIDLE\tFAST\tPREVIOUS")
	for _, x := range c.Conns {
		prev := x.Previous
		if prev == "" {
			prev = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s %s\t%s\t%s\t%s\t%s\t%s\t%s\n", x.Protocol, x.Client, x.VIP, x.VIPAddress,
			x.Backend, x.State, time.Duration(x.AgeSeconds)*time.Second, time.Duration(x.IdleSeconds)*time.Second, x.FastPath, prev)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if c.Truncated {
		_, err := fmt.Fprintf(w, "(%d flows shown: the limit; more match. -limit N shows up to %d)\n", len(c.Conns), MaxConnsLimit)
		return err
	}
	_, err := fmt.Fprintf(w, "(%d flows)\n", len(c.Conns))
	return err
}
