package afpacket

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
)

// ErrHost is wrapped by every CheckHost finding.
var ErrHost = errors.New("host not set up for AF_PACKET mode")

// CheckHost verifies what AF_PACKET mode needs from the host, whose kernel
// receives a copy of every frame vipd handles:
//
//   - IPv4 forwarding off (net.ipv4.ip_forward = 0), and IPv6 forwarding
//     off when a VIP is IPv6: otherwise the kernel would forward each VIP
//     packet (and each NAT reply) a second time, untranslated.
//   - No VIP assigned to a local interface: otherwise the kernel would
//     answer connections to it itself.
//
// procRoot is normally "/proc" (tests point it elsewhere). Every problem is
// reported, with the command that fixes it.
func CheckHost(procRoot string, vips []netip.Addr) error {
	var problems []string
	has6 := false
	for _, v := range vips {
		has6 = has6 || v.Is6()
	}
	if on, err := sysctlOn(procRoot, "sys/net/ipv4/ip_forward"); err != nil {
		problems = append(problems, err.Error())
	} else if on {
		problems = append(problems, "IPv4 forwarding is on: the kernel would forward VIP traffic a second time (sysctl -w net.ipv4.ip_forward=0)")
	}
	if has6 {
		if on, err := sysctlOn(procRoot, "sys/net/ipv6/conf/all/forwarding"); err != nil {
			problems = append(problems, err.Error())
		} else if on {
			problems = append(problems, "IPv6 forwarding is on: the kernel would forward VIP traffic a second time (sysctl -w net.ipv6.conf.all.forwarding=0)")
		}
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		local := map[netip.Addr]bool{}
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				local[p.Addr()] = true
			}
		}
		for _, v := range vips {
			if local[v] {
				problems = append(problems, fmt.Sprintf("VIP %s is assigned to a local interface: the kernel would answer it too (ip addr del %s/... dev ...)", v, v))
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w:\n  %s", ErrHost, strings.Join(problems, "\n  "))
	}
	return nil
}

func sysctlOn(procRoot, path string) (bool, error) {
	b, err := os.ReadFile(procRoot + "/" + path)
	if err != nil {
		return false, fmt.Errorf("cannot read %s: %v", path, err)
	}
	return strings.TrimSpace(string(b)) != "0", nil
}
