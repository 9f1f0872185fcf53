//go:build !amd64

package conntrack

// haveSIMD: scanPairSIMD has only an amd64 version.
var haveSIMD = false

func scanPairSIMD(b0, b1 *bucket) (uint64, uint32, Tick, uint64) {
	panic("conntrack: scanPairSIMD without SIMD")
}
