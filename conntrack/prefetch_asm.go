//go:build amd64 || arm64

package conntrack

import "unsafe"

// prefetchLine asks the CPU to bring the cache line holding p into its
// caches (PREFETCHT0, PRFM PLDL1KEEP) and returns at once: unlike a load,
// the hint holds no place in the reorder window while the line is on its
// way, so a batch's worth of them overlap whatever follows.
//
//go:noescape
func prefetchLine(p unsafe.Pointer)

// prefetch starts loading the cache line at p.
func (s *Shard) prefetch(p unsafe.Pointer) { prefetchLine(p) }
