package prefetch

import (
	"testing"
	"unsafe"
)

// TestLine calls the hint on the addresses a caller may pass: inside a
// buffer, at its last byte, and nil (a hint never faults).
func TestLine(t *testing.T) {
	buf := make([]byte, 4096)
	for _, p := range []unsafe.Pointer{unsafe.Pointer(&buf[0]), unsafe.Pointer(&buf[len(buf)-1]), nil} {
		Line(p)
	}
	if n := testing.AllocsPerRun(100, func() { Line(unsafe.Pointer(&buf[64])) }); n != 0 {
		t.Errorf("Line allocates %v times", n)
	}
}

func BenchmarkLine(b *testing.B) {
	buf := make([]byte, 1<<20)
	for i := 0; i < b.N; i++ {
		Line(unsafe.Pointer(&buf[(i*64)&(len(buf)-1)]))
	}
}
