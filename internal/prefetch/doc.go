// Package prefetch gives the packet path the CPU's prefetch hint, which Go
// has no intrinsic for: Line asks for the cache line holding a pointer and
// returns at once. A batch pipeline issues one per frame for the memory it
// will read a little later (the frame's headers, its connection-table
// bucket), so that the misses overlap rather than follow one another.
//
// It is PREFETCHT0 on amd64 and PRFM PLDL1KEEP on arm64, in a few lines of
// Go assembly; elsewhere Line does nothing, which a hint may.
package prefetch
