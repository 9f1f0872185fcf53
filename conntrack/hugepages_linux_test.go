package conntrack

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestHugePagesAdvised checks that a table's bucket array sits in a mapping
// the kernel considers eligible for transparent huge pages. Whether huge
// pages are actually handed out depends on free memory, so that is only
// logged; eligibility is what New controls. Skips only when THP is off.
func TestHugePagesAdvised(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Skipf("transparent huge pages unavailable (%q, %v)", mode, err)
	}
	tab, err := New(Config{Capacity: 1 << 20, Shards: 1}) // 40 MiB
	if err != nil {
		t.Fatal(err)
	}
	bs := tab.Shard(0).buckets
	mid := uintptr(unsafe.Pointer(&bs[len(bs)/2]))
	for i := range bs { // fault the pages in
		bs[i].ovf = 0
	}

	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in := false
	eligible := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if lo, hi, ok := strings.Cut(fields[0], "-"); ok && len(fields) >= 5 {
			a, err1 := strconv.ParseUint(lo, 16, 64)
			b, err2 := strconv.ParseUint(hi, 16, 64)
			in = err1 == nil && err2 == nil && uintptr(a) <= mid && mid < uintptr(b)
			continue
		}
		if !in {
			continue
		}
		switch fields[0] {
		case "AnonHugePages:":
			t.Logf("mapping holding the table: %s", line)
		case "THPeligible:":
			eligible = fields[1]
		}
	}
	if eligible != "1" {
		t.Errorf("table memory THPeligible = %q, want 1 (THP mode %q)", eligible, strings.TrimSpace(string(mode)))
	}
}
