package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/vipd/vipd/control/admin/api"
)

// ConnsProvider is what a Provider implements to serve GET /v1/conns; a
// provider without it answers 501.
type ConnsProvider interface {
	Conns(ctx context.Context, q api.ConnsQuery) (*api.Conns, error)
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
		cq := api.ConnsQuery{VIP: q.Get("vip"), Client: q.Get("client"), Backend: q.Get("backend")}
		if ls := q.Get("limit"); ls != "" {
			n, err := strconv.Atoi(ls)
			if err != nil || n < 1 {
				http.Error(w, fmt.Sprintf("limit must be 1..%d", api.MaxConnsLimit), http.StatusBadRequest)
				return
			}
			cq.Limit = n
		}
		cq.Limit = api.ConnsLimit(cq.Limit)
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		ans, err := cp.Conns(ctx, cq)
		if err != nil {
			code := http.StatusBadRequest
			switch {
			case errors.Is(err, api.ErrNotFound):
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
