package api

import "time"

// DrainRequest is the body of POST /v1/drain.
type DrainRequest struct {
	VIP     string `json:"vip"`
	Backend string `json:"backend"`
	Drain   *bool  `json:"drain"`
}

// Box drain states (BGPState.Box, BoxDrainAnswer.Box).
const (
	BoxAnnouncing = "announcing"
	BoxDraining   = "draining"
	BoxDrained    = "drained"
)

// BoxDrainRequest is the body of POST /v1/drain-box.
type BoxDrainRequest struct {
	Undo bool `json:"undo"`
}

// BoxDrainAnswer is the answer of POST /v1/drain-box.
type BoxDrainAnswer struct {
	Box         string    `json:"box"` // BoxAnnouncing, BoxDraining or BoxDrained
	LingerUntil time.Time `json:"linger_until,omitzero"`
}
