//go:build linux

package decap

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// openTUN creates the TUN device name (layer 3, no packet-information
// prefix: each write is exactly one IP packet, its version nibble telling
// the kernel IPv4 from IPv6) and returns its queue.
//
// The device is not persistent (TUNSETPERSIST is never called), so the
// kernel deletes it when the returned file — its only queue — is closed,
// also when the process dies.
func openTUN(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("decap: open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("decap: TUN name %q: %w", name, err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EBUSY) {
			return nil, fmt.Errorf("decap: TUN %s is in use (another vipd-decap?): %w", name, err)
		}
		if errors.Is(err, unix.EINVAL) {
			return nil, fmt.Errorf("decap: TUN %s: a device of that name exists and is not a TUN: %w", name, err)
		}
		return nil, fmt.Errorf("decap: create TUN %s: %w", name, err)
	}
	// O_NONBLOCK makes os.NewFile hand the descriptor to the runtime
	// poller; writes to a TUN never wait anyway (the kernel queues the
	// packet to its backlog or drops it), reads are never done.
	return os.NewFile(uintptr(fd), "/dev/net/tun:"+name), nil
}

// setLinkUp sets IFF_UP on the interface name, as `ip link set name up`
// does, with the SIOCGIFFLAGS/SIOCSIFFLAGS ioctls on a throwaway socket of
// the calling thread's network namespace.
func setLinkUp(name string) error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("decap: socket for ioctl: %w", err)
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("decap: get flags of %s: %w", name, err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("decap: set %s up: %w", name, err)
	}
	return nil
}
