//go:build linux

package tunprobe

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ErrRPFilter is wrapped by New's error when strict reverse-path
// filtering would drop the backends' answers.
var ErrRPFilter = fmt.Errorf("tunprobe: strict reverse-path filtering drops the backends' answers to tunnel probes")

// checkRPFilter fails when IPv4 replies from a VIP arriving on egress
// would be dropped by strict reverse-path filtering: the box routes the
// VIP (a client-facing address) elsewhere, so its strict check (1) fails
// for a packet from the VIP arriving on the egress interface. The kernel
// applies the larger of all and the interface; loose mode (2) passes
// whenever the box has any route to the VIP (a default route does). vipd
// does not change the setting: it is the operator's policy. IPv6 has no
// reverse-path filter sysctl.
func checkRPFilter(egress string, v4 bool) error {
	if !v4 {
		return nil
	}
	all, err := readSysctl("all")
	if err != nil {
		return err
	}
	dev, err := readSysctl(egress)
	if err != nil {
		return err
	}
	if max(all, dev) == 1 {
		return fmt.Errorf("%w: net.ipv4.conf.all.rp_filter=%d and net.ipv4.conf.%s.rp_filter=%d; set both to 2 (loose) or 0, for example sysctl -w net.ipv4.conf.all.rp_filter=2 net.ipv4.conf.%s.rp_filter=2, or probe = \"direct\"",
			ErrRPFilter, all, egress, dev, strings.ReplaceAll(egress, ".", "/"))
	}
	return nil
}

// CheckRPFilter fails with ErrRPFilter when strict reverse-path filtering
// on egress (or all) would drop the answers to IPv4 tunnel probes, as New
// does; vipd -check calls it. It reads the calling thread's namespace.
func CheckRPFilter(egress string) error { return checkRPFilter(egress, true) }

// readSysctl reads net.ipv4.conf.<dev>.rp_filter of the calling thread's
// namespace (/proc/sys/net resolves against the opening task's).
func readSysctl(dev string) (int, error) {
	path := "/proc/sys/net/ipv4/conf/" + dev + "/rp_filter"
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("tunprobe: read net.ipv4.conf.%s.rp_filter: %w", dev, err)
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}
