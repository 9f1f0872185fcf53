package rig

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vipd/vipd/bench"
)

// Profile samples every CPU with perf (cpu-clock, 999 Hz; the VM has no
// hardware counters) for window and summarizes where the time went: by
// process and object, then the hottest symbols. A failure is reported in
// the section's text.
// comm, when set, names the box program whose own code gets a symbol
// table of its own.
func Profile(perf, name, dir string, window time.Duration, comm string) *bench.Section {
	return ProfileCPU(perf, name, dir, window, comm, -1)
}

// ProfileCPU is Profile restricted to one CPU (perf record -C), or all
// CPUs when cpu < 0.
func ProfileCPU(perf, name, dir string, window time.Duration, comm string, cpu int) *bench.Section {
	data := filepath.Join(dir, "perf.data")
	sec := &bench.Section{Title: "Profile: " + name,
		Intro: fmt.Sprintf("`perf record -a -F 999` over one %v window with the generator running (all CPUs; "+
			"the generator's share includes the kernel work done in its context, such as the veth receive of the box). "+
			"Percentages are of all samples, idle included.", window)}
	args := []string{"record", "-a", "-F", "999", "-o", data}
	if cpu >= 0 {
		args = append(args, "-C", strconv.Itoa(cpu))
		sec.Intro = fmt.Sprintf("`perf record -C %d -F 999` over one %v window with the generator running: the box's CPU only "+
			"(its program, the receive NAPI kthread, the transmit and the sink's receive that run in their context, and any "+
			"other task that ran there). Percentages are of that CPU's samples, idle included.", cpu, window)
	}
	rec := exec.Command(perf, append(args, "--", "sleep", strconv.FormatFloat(window.Seconds(), 'f', -1, 64))...)
	if out, err := rec.CombinedOutput(); err != nil {
		sec.Text = fmt.Sprintf("perf record failed: %v\n%s", err, out)
		return sec
	}
	var b strings.Builder
	report := func(title string, args ...string) {
		cmd := exec.Command(perf, append([]string{"report", "-i", data, "--stdio", "-q"}, args...)...)
		out, err := cmd.Output()
		fmt.Fprintf(&b, "== %s\n", title)
		if err != nil {
			fmt.Fprintf(&b, "perf report failed: %v\n", err)
			return
		}
		lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
		n := 0
		for _, l := range lines {
			if strings.TrimSpace(l) == "" {
				continue
			}
			b.WriteString(strings.TrimRight(l, " ") + "\n")
			if n++; n >= 25 {
				break
			}
		}
		b.WriteString("\n")
	}
	report("by process and object", "--sort", "comm,dso", "--percent-limit", "0.5")
	report("hottest symbols (all processes)", "--sort", "comm,sym", "--percent-limit", "0.7")
	if comm != "" {
		report(comm+"'s own code (share of all samples)", "--comms", comm, "--dsos", comm, "--sort", "sym", "--percent-limit", "0.2")
	}
	sec.Text = b.String()
	return sec
}
