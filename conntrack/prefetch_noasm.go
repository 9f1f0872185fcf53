//go:build !amd64 && !arm64

package conntrack

import "unsafe"

// prefetch starts loading the cache line at p. Without an assembly hint
// for the architecture it is an ordinary load whose value is folded into
// a field nothing reads: the CPU does not wait for a load until its value
// is needed, and the compiler cannot drop a load whose value is stored.
func (s *Shard) prefetch(p unsafe.Pointer) { s.sink += uint64(*(*uint8)(p)) }
