package offload

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

// ifreqData is struct ifreq with ifr_data set. The pointer is a real
// pointer field, not bytes inside the union, so that the garbage collector
// and stack moves keep it valid (the same layout as x/sys/unix's unexported
// ifreqData).
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [unsafe.Sizeof(unix.Ifreq{}) - unix.IFNAMSIZ - unsafe.Sizeof(uintptr(0))]byte // the rest of the union
}

// ethtool runs one ethtool_value command on the interface called ifname,
// in the network namespace of the socket fd.
func ethtool(fd int, ifname string, cmd, data uint32) (uint32, error) {
	if len(ifname) >= unix.IFNAMSIZ {
		return 0, fmt.Errorf("interface name %q too long", ifname)
	}
	v := ethtoolValue{cmd: cmd, data: data}
	ifr := ifreqData{data: unsafe.Pointer(&v)}
	copy(ifr.name[:], ifname)
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); errno != 0 {
		return 0, errno
	}
	return v.data, nil
}

// txChecksum reports whether the interface called ifname has any TX
// checksum offload on (ETHTOOL_GTXCSUM: ethtool's "tx-checksumming", the
// union of tx-checksum-ip-generic, -ipv4, -ipv6, -sctp and -fcoe-crc).
func txChecksum(fd int, ifname string) (bool, error) {
	v, err := ethtool(fd, ifname, unix.ETHTOOL_GTXCSUM, 0)
	if err != nil {
		return false, fmt.Errorf("offload: ETHTOOL_GTXCSUM on %s: %w", ifname, err)
	}
	return v != 0, nil
}

// SetTxChecksum turns TX checksum offload on or off on the interface called
// ifname in the caller's network namespace, as "ethtool -K IFNAME tx on|off"
// does. Turning it off also turns off TCP segmentation offload, which
// depends on it. It needs CAP_NET_ADMIN.
func SetTxChecksum(ifname string, on bool) error {
	fd, err := ioctlSocket()
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var data uint32
	if on {
		data = 1
	}
	if _, err := ethtool(fd, ifname, unix.ETHTOOL_STXCSUM, data); err != nil {
		return fmt.Errorf("offload: ETHTOOL_STXCSUM %d on %s: %w", data, ifname, err)
	}
	return nil
}

// ioctlSocket opens a socket for interface ioctls in the calling thread's
// network namespace. Interface ioctls act on the namespace of the socket,
// whichever thread issues them.
func ioctlSocket() (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		// A kernel without IPv4: ethtool(8) falls back the same way.
		fd, err = unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	}
	if err != nil {
		return -1, fmt.Errorf("offload: socket for ioctls: %w", err)
	}
	return fd, nil
}

// nameOf returns the name of the interface with the given index in the
// network namespace of the socket fd (SIOCGIFNAME).
func nameOf(fd int, index int) (string, error) {
	ifr, err := unix.NewIfreq("")
	if err != nil {
		return "", err
	}
	ifr.SetUint32(uint32(index))
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFNAME, ifr); err != nil {
		return "", fmt.Errorf("offload: SIOCGIFNAME %d: %w", index, err)
	}
	return ifr.Name(), nil
}
