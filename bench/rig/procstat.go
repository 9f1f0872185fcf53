package rig

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/vipd/vipd/bench"
)

// CPUStat is one CPU's line of /proc/stat, in clock ticks (USER_HZ).
type CPUStat struct {
	User, Nice, System, Idle, IOWait, IRQ, SoftIRQ, Steal float64
}

// Total is every field; guest and guest_nice are already in user and nice.
func (c CPUStat) Total() float64 {
	return c.User + c.Nice + c.System + c.Idle + c.IOWait + c.IRQ + c.SoftIRQ + c.Steal
}

// ParseCPUStats parses the per-CPU lines ("cpuN ...") of /proc/stat,
// indexed by N; the aggregate "cpu" line is skipped. Lines with fewer than
// the eight fields of every kernel since 2.6.11 are an error.
func ParseCPUStats(text string) (map[int]CPUStat, error) {
	m := map[int]CPUStat{}
	for _, line := range strings.Split(text, "\n") {
		fs := strings.Fields(line)
		if len(fs) == 0 || !strings.HasPrefix(fs[0], "cpu") || fs[0] == "cpu" {
			continue
		}
		n, err := strconv.Atoi(fs[0][3:])
		if err != nil {
			continue
		}
		if len(fs) < 9 {
			return nil, fmt.Errorf("/proc/stat: %s: %d fields, want at least 8", fs[0], len(fs)-1)
		}
		var v [8]float64
		for i := range v {
			if v[i], err = strconv.ParseFloat(fs[i+1], 64); err != nil {
				return nil, fmt.Errorf("/proc/stat: %s: %w", fs[0], err)
			}
		}
		m[n] = CPUStat{User: v[0], Nice: v[1], System: v[2], Idle: v[3], IOWait: v[4], IRQ: v[5], SoftIRQ: v[6], Steal: v[7]}
	}
	return m, nil
}

// SplitBetween is where a CPU's time went between two readings, as shares
// of the elapsed total (zero when no time passed).
func SplitBetween(a, b CPUStat) bench.CPUSplit {
	dt := b.Total() - a.Total()
	if dt <= 0 {
		return bench.CPUSplit{}
	}
	return bench.CPUSplit{
		User:    (b.User + b.Nice - a.User - a.Nice) / dt,
		Sys:     (b.System - a.System) / dt,
		IRQ:     (b.IRQ - a.IRQ) / dt,
		SoftIRQ: (b.SoftIRQ - a.SoftIRQ) / dt,
		Steal:   (b.Steal - a.Steal) / dt,
		Idle:    (b.Idle + b.IOWait - a.Idle - a.IOWait) / dt,
	}
}

// TaskStat is what the rig reads from /proc/PID/stat.
type TaskStat struct {
	Comm         string
	PGrp         int
	UTime, STime float64 // clock ticks, all threads of the process
}

// ParseTaskStat parses /proc/PID/stat. The command name is in parentheses
// and may itself contain spaces and parentheses, so the fields are counted
// from the last ')'.
func ParseTaskStat(text string) (TaskStat, error) {
	open, end := strings.IndexByte(text, '('), strings.LastIndexByte(text, ')')
	if open < 0 || end < open {
		return TaskStat{}, fmt.Errorf("/proc/PID/stat: no command name in %q", text)
	}
	fs := strings.Fields(text[end+1:])
	// fs[0] is field 3 (state): pgrp is field 5, utime 14, stime 15.
	if len(fs) < 13 {
		return TaskStat{}, fmt.Errorf("/proc/PID/stat: %d fields after the command name, want at least 13", len(fs))
	}
	var st TaskStat
	st.Comm = text[open+1 : end]
	var err error
	if st.PGrp, err = strconv.Atoi(fs[2]); err != nil {
		return TaskStat{}, fmt.Errorf("/proc/PID/stat: pgrp: %w", err)
	}
	if st.UTime, err = strconv.ParseFloat(fs[11], 64); err != nil {
		return TaskStat{}, fmt.Errorf("/proc/PID/stat: utime: %w", err)
	}
	if st.STime, err = strconv.ParseFloat(fs[12], 64); err != nil {
		return TaskStat{}, fmt.Errorf("/proc/PID/stat: stime: %w", err)
	}
	return st, nil
}

// ReadTaskStat reads /proc/PID/stat.
func ReadTaskStat(pid int) (TaskStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return TaskStat{}, err
	}
	return ParseTaskStat(string(b))
}

// ReadCPUStats reads /proc/stat.
func ReadCPUStats() (map[int]CPUStat, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return nil, err
	}
	return ParseCPUStats(string(b))
}
