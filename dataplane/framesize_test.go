package dataplane

import "testing"

// TestFrameSizeFor checks the choice at its edge, with a driver that
// loses 256 bytes of a frame and adds 18 to a packet: 2048 while every MTU
// is at most 2048 − 256 − 18 = 1774, else 4096. (daemon's TestFrameSize
// pins the same edges with the real drivers' MaxFrame and FrameOverhead.)
func TestFrameSizeFor(t *testing.T) {
	maxFrame := func(size int) int { return size - 256 }
	tests := []struct {
		mtus []int
		want int
	}{
		{nil, 2048},
		{[]int{1500}, 2048},
		{[]int{1500, 1774}, 2048},
		{[]int{1775, 1500}, 4096},
		{[]int{9000}, 4096},
	}
	for _, tt := range tests {
		if got := FrameSizeFor(maxFrame, 18, tt.mtus...); got != tt.want {
			t.Errorf("FrameSizeFor(%v) = %d, want %d", tt.mtus, got, tt.want)
		}
	}
}
