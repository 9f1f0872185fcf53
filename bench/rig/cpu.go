package rig

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// CPUTimes are the /proc/stat jiffies of each CPU: busy and total.
type CPUTimes struct {
	Busy, Total []float64
}

// ReadCPU reads /proc/stat (machine-wide: namespaces do not split it).
func ReadCPU() CPUTimes {
	var c CPUTimes
	f, err := os.Open("/proc/stat")
	if err != nil {
		return c
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 6 || !strings.HasPrefix(fs[0], "cpu") || fs[0] == "cpu" {
			continue
		}
		var total, idle float64
		for i, s := range fs[1:] {
			v, _ := strconv.ParseFloat(s, 64)
			if i >= 8 { // guest and guest_nice are already in user and nice
				break
			}
			total += v
			if i == 3 || i == 4 { // idle, iowait
				idle += v
			}
		}
		c.Busy = append(c.Busy, total-idle)
		c.Total = append(c.Total, total)
	}
	return c
}

// BusyBetween returns each CPU's busy share between two readings.
func BusyBetween(a, b CPUTimes) []float64 {
	n := min(len(a.Busy), len(b.Busy))
	out := make([]float64, n)
	for i := 0; i < n; i++ {
		if dt := b.Total[i] - a.Total[i]; dt > 0 {
			out[i] = (b.Busy[i] - a.Busy[i]) / dt
		}
	}
	return out
}
