package conntrack

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// haveSIMD: scanPairSIMD needs SSE4.1 (PMINUD), which every x86-64
// server CPU since 2008 has. A variable, so that tests run both versions.
var haveSIMD = cpu.X86.HasSSE41

// scanPairSIMD reads a full pair's metadata for scanPair in SSE4.1: the
// sixteen state bytes in one register give lv, the lowest proof level
// below ProofTicks any slot is at, and c, the mask of the pair slots at
// it (empty if every slot is proven); the sixteen ticks in four give the
// oldest tick of all slots and best, the least seen<<4 | pair slot of the
// slots in c (undefined when c is empty). About 90 instructions where
// scanPairGo takes about 400.
//
//go:noescape
func scanPairSIMD(b0, b1 *bucket) (lv uint64, c uint32, oldest Tick, best uint64)

// scan_amd64.s hard-codes what these say: the proof level in bits 3-4 of a
// state byte, ProofTicks = 3 (levels 0-2 evictable), eight 4-byte ticks
// per bucket (two 16-byte loads). A change to any fails the build here.
const (
	_ = uint(levelShift - 3)
	_ = uint(3 - levelShift)
	_ = uint(levelMask - 0x18)
	_ = uint(0x18 - levelMask)
	_ = uint(ProofTicks - 3)
	_ = uint(3 - ProofTicks)
	_ = uint(slotsPerBucket - 8)
	_ = uint(8 - slotsPerBucket)
	_ = uint(unsafe.Sizeof(Tick(0)) - 4)
	_ = uint(4 - unsafe.Sizeof(Tick(0)))
)
