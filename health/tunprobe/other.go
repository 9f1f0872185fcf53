//go:build !linux

package tunprobe

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"time"
)

// ErrUnsupported is returned by New off Linux.
var ErrUnsupported = errors.New("tunprobe: needs Linux (TUN, fwmark rules)")

// Options configures New (see the Linux build).
type Options struct {
	TUN              string
	Mark, Table      uint32
	Priority         uint32
	Source4, Source6 netip.Addr
	Egress           string
	Linger           time.Duration
	Logger           *slog.Logger
}

// Prober is unavailable off Linux.
type Prober struct{}

// New fails off Linux.
func New(Options) (*Prober, error) { return nil, ErrUnsupported }

// Dial fails off Linux.
func (p *Prober) Dial(context.Context, netip.AddrPort, Path) (net.Conn, error) {
	return nil, ErrUnsupported
}

// Stats is empty off Linux.
func (p *Prober) Stats() Stats { return Stats{} }

// Close does nothing off Linux.
func (p *Prober) Close() error { return nil }

// CheckRPFilter has nothing to check off Linux.
func CheckRPFilter(string) error { return nil }
