// Package stream is the deterministic byte stream the test bed's backends
// serve and clients check: the same bytes on both sides without storing
// them, so a 64 MiB transfer can be compared by sha256.
package stream
