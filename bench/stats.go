package bench

import (
	"math"
	"sort"
)

// Summary is the median of a few repetitions with their spread.
type Summary struct {
	Median, Min, Max float64
	N                int
}

// Summarize returns the median, minimum and maximum of xs (the mean of the
// two middle values for an even count). NaNs are ignored; no values give
// a zero Summary.
func Summarize(xs []float64) Summary {
	v := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return Summary{}
	}
	sort.Float64s(v)
	s := Summary{Min: v[0], Max: v[len(v)-1], N: len(v)}
	if len(v)%2 == 1 {
		s.Median = v[len(v)/2]
	} else {
		s.Median = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return s
}

// Ratio is a / b, or NaN when b is not positive.
func Ratio(a, b float64) float64 {
	if b <= 0 {
		return math.NaN()
	}
	return a / b
}
