package conntrack

import (
	"syscall"
	"unsafe"
)

// hugePage is the size of an x86-64 / arm64 transparent huge page.
const hugePage = 2 << 20

// adviseHugePages asks the kernel to back the 2 MiB-aligned interior of a
// freshly allocated bucket array with transparent huge pages
// (madvise MADV_HUGEPAGE; honoured when THP is "always" or "madvise").
//
// Why: lookups land on random buckets, so with 4 KiB pages nearly every
// one also misses the TLB, and under virtualization a page walk costs
// several more memory reads. 2 MiB pages let the TLB cover a 10M-flow table.
// It must run before the memory is first written (New calls it right after
// make, whose large allocations come untouched from the OS), so that page
// faults allocate huge pages directly.
//
// Best effort: an error (THP disabled, old kernel) leaves the table exactly
// as correct, only slower. Arrays smaller than a huge page are left alone.
func adviseHugePages(bs []bucket) {
	if len(bs) == 0 {
		return
	}
	base := unsafe.Pointer(unsafe.SliceData(bs))
	size := uintptr(len(bs)) * unsafe.Sizeof(bs[0])
	p := uintptr(base)
	start := (p + hugePage - 1) &^ (hugePage - 1)
	end := (p + size) &^ (hugePage - 1)
	if end <= start {
		return
	}
	mem := unsafe.Slice((*byte)(unsafe.Add(base, start-p)), end-start)
	_ = syscall.Madvise(mem, syscall.MADV_HUGEPAGE)
}
