package hashing

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Backend is one member of the set a Table is built from.
type Backend struct {
	// ID is the backend's stable identity. Tables depend on it, not on the
	// backend's position in the slice, so it must not change while the
	// backend stays in the set. The control plane uses "addr:port", e.g.
	// "198.18.1.10:8080" or "[2001:db8::1]:80".
	ID string
	// Weight is the backend's relative share of the flows, >= 1.
	Weight uint32
}

// Table maps a flow hash to the backend that serves the flow.
//
// Lookup returns an index into the []Backend slice the table was built from,
// or -1 if that slice was empty. A Table is immutable once built and safe for
// concurrent use. Its content depends only on the set of (ID, Weight) pairs:
// for any permutation of the input slice, Lookup returns the index of the same
// ID.
type Table interface {
	Lookup(h uint64) int
}

// MaxBackends is the largest backend set any table accepts. It lets Maglev
// store its entries as uint16.
const MaxBackends = 65535

// Errors returned by the table constructors, wrapped with the offending value;
// test for them with errors.Is.
var (
	ErrNotPrime        = errors.New("table size is not prime")
	ErrTableTooSmall   = errors.New("table size is smaller than the number of backends")
	ErrTableTooLarge   = errors.New("table too large")
	ErrTooManyBackends = errors.New("too many backends")
	ErrDuplicateID     = errors.New("duplicate backend ID")
	ErrEmptyID         = errors.New("empty backend ID")
	ErrZeroWeight      = errors.New("backend weight is zero")
	ErrBadVnodes       = errors.New("virtual nodes per unit weight must be >= 1")
)

// canonical validates backends and returns their indices ordered by ID. Every
// table is built by walking the backends in this order, which is what makes
// its content independent of the caller's slice order.
func canonical(backends []Backend) ([]int, error) {
	if len(backends) > MaxBackends {
		return nil, fmt.Errorf("hashing: %d backends, at most %d: %w", len(backends), MaxBackends, ErrTooManyBackends)
	}
	order := make([]int, len(backends))
	for i, b := range backends {
		if b.ID == "" {
			return nil, fmt.Errorf("hashing: backend %d: %w", i, ErrEmptyID)
		}
		if b.Weight == 0 {
			return nil, fmt.Errorf("hashing: backend %q: %w", b.ID, ErrZeroWeight)
		}
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(backends[a].ID, backends[b].ID) })
	for k := 1; k < len(order); k++ {
		if id := backends[order[k]].ID; id == backends[order[k-1]].ID {
			return nil, fmt.Errorf("hashing: backend %q: %w", id, ErrDuplicateID)
		}
	}
	return order, nil
}

// gcdWeights returns the greatest common divisor of all weights (0 for an
// empty set). Tables that repeat a backend once per unit of weight divide by
// it first, so {2, 4} costs no more than {1, 2}.
func gcdWeights(backends []Backend) uint32 {
	var g uint32
	for _, b := range backends {
		x, y := g, b.Weight
		for y != 0 {
			x, y = y, x%y
		}
		g = x
	}
	return g
}
