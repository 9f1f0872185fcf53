//go:build !race

package daemon

// raceDetector: the test binary runs under the race detector.
const raceDetector = false
