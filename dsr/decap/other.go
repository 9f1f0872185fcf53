//go:build !linux

package decap

import (
	"context"
	"errors"
)

// ErrUnsupported is returned by New on systems other than Linux: the TUN
// and raw-socket interfaces it uses are Linux's.
var ErrUnsupported = errors.New("decap: only Linux is supported")

// Decap is only implemented on Linux.
type Decap struct{}

// New returns ErrUnsupported.
func New(Options) (*Decap, error) { return nil, ErrUnsupported }

// TUN returns "".
func (d *Decap) TUN() string { return "" }

// Stats returns zero counters.
func (d *Decap) Stats() Stats { return Stats{} }

// Run returns ErrUnsupported.
func (d *Decap) Run(context.Context) error { return ErrUnsupported }

// Close does nothing.
func (d *Decap) Close() error { return nil }
