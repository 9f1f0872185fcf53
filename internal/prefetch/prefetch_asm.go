//go:build amd64 || arm64

package prefetch

import "unsafe"

// Line asks the CPU to bring the cache line holding p into its caches and
// returns at once: unlike a load, the hint holds no place in the reorder
// window while the line is on its way. p is not dereferenced: any address
// is safe.
//
//go:noescape
func Line(p unsafe.Pointer)
