package api

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

// ConnsLimit is the limit a listing asked for n uses.
func ConnsLimit(n int) int {
	if n <= 0 {
		return DefaultConnsLimit
	}
	return min(n, MaxConnsLimit)
}
