package api

import "errors"

// The errors a Provider's answers wrap, and what the server answers for
// each: the status tells the client which it was; the body, plain text,
// is the error's message.
var (
	// ErrNotFound: no such VIP or backend (a *NameError wraps it). The
	// server answers 404.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the request cannot be done by an override (enabling a
	// backend the file disables). The server answers 409.
	ErrConflict = errors.New("conflict")
	// ErrInvalid: the request is malformed (a weight out of range). The
	// server answers 400.
	ErrInvalid = errors.New("invalid request")
	// ErrNoBGP: a box drain asked of a vipd that runs without [bgp]. The
	// server answers 409.
	ErrNoBGP = errors.New("vipd runs without [bgp]: there is nothing to withdraw")
)
