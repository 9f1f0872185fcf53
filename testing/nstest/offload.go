package nstest

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ethtoolValue is struct ethtool_value (include/uapi/linux/ethtool.h).
type ethtoolValue struct {
	cmd  uint32
	data uint32
}

// NoTxOffload turns off transmit checksum offload (and with it TSO) and
// software GSO on an interface in the namespace.
//
// Test beds need it on every veth that sends toward vipd: a veth hands
// frames over with the transport checksum still partial (CHECKSUM_PARTIAL:
// only the pseudo-header summed, to be completed "by the NIC") and as
// 64 KiB GSO super-frames. A frame that crosses AF_XDP into user space
// loses that state, so it would arrive at the backend with a wrong
// checksum. Physical NICs always deliver whole frames with complete
// checksums; this is a property of the virtual wire, not of vipd.
func (n *NS) NoTxOffload(tb T, ifname string) {
	tb.Helper()
	err := n.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		for _, cmd := range []uint32{unix.ETHTOOL_STXCSUM, unix.ETHTOOL_SGSO, unix.ETHTOOL_STSO} {
			ev := ethtoolValue{cmd: cmd}
			var ifr [40]byte // struct ifreq: name[16], then a pointer
			copy(ifr[:16], ifname)
			*(*uintptr)(unsafe.Pointer(&ifr[16])) = uintptr(unsafe.Pointer(&ev))
			if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); errno != 0 && errno != unix.EOPNOTSUPP {
				return fmt.Errorf("ethtool %#x on %s: %w", cmd, ifname, errno)
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("nstest: %v", err)
	}
}
