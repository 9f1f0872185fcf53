//go:build linux

package tunprobe

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// openTUN creates the TUN device name (layer 3, no packet-information
// prefix) and sets it up. It is not persistent: the kernel deletes it, and
// every route through it, when the returned file is closed, also when the
// process dies.
func openTUN(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("tunprobe: open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tunprobe: TUN name %q: %w", name, err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EINVAL) {
			return nil, fmt.Errorf("tunprobe: TUN %s: a device of that name exists (another vipd?): %w", name, err)
		}
		return nil, fmt.Errorf("tunprobe: create TUN %s: %w", name, err)
	}
	// O_NONBLOCK hands the descriptor to the runtime poller, so that Close
	// ends a blocked Read.
	f := os.NewFile(uintptr(fd), "/dev/net/tun:"+name)
	if err := setLinkUp(name); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// setLinkUp sets IFF_UP on the interface name.
func setLinkUp(name string) error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("tunprobe: socket for ioctl: %w", err)
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("tunprobe: get flags of %s: %w", name, err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("tunprobe: set %s up: %w", name, err)
	}
	return nil
}

// openRaw opens a socket that sends whole IP packets of family: protocol
// IPPROTO_RAW implies IP_HDRINCL for IPv4, and for IPv6 has the kernel
// take the IPv6 header from the caller too, so the outer source is the
// VIP's encapsulation source rather than an address the kernel picks.
// Packets leave by the main routing table (no mark), out of the interface
// toward the backend; it never receives.
func openRaw(family int) (*os.File, error) {
	fd, err := unix.Socket(family, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.IPPROTO_RAW)
	if err != nil {
		return nil, fmt.Errorf("tunprobe: raw socket: %w (needs CAP_NET_RAW)", err)
	}
	return os.NewFile(uintptr(fd), "tunprobe-raw"), nil
}

// read forwards the TUN's packets until the TUN is closed.
func (p *Prober) read() {
	defer close(p.done)
	buf := make([]byte, headroom+65536)
	for {
		n, err := p.tun.Read(buf[headroom:])
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			p.stats.readErrors.Add(1)
			p.opts.Logger.Warn("tunprobe: read TUN", "err", err)
			time.Sleep(10 * time.Millisecond) // a persistent error must not spin
			continue
		}
		p.forward(buf, headroom, n)
	}
}

// forward encapsulates the packet buf[at:at+n] to its connection's
// backend and sends it.
func (p *Prober) forward(buf []byte, at, n int) {
	k, ok := parse(buf[at : at+n])
	if !ok {
		p.stats.notProbe.Add(1)
		return
	}
	path, ok := p.lookup(k, time.Now().UnixNano())
	if !ok {
		p.stats.unknown.Add(1)
		return
	}
	o := wrap(buf, at, n, &path, k.port)
	var raw *os.File
	var sa unix.Sockaddr
	if k.v6 {
		raw, sa = p.raw6, &unix.SockaddrInet6{Addr: path.Backend.As16()}
	} else {
		raw, sa = p.raw4, &unix.SockaddrInet4{Addr: path.Backend.As4()}
	}
	rc, err := raw.SyscallConn()
	if err == nil {
		cerr := rc.Write(func(fd uintptr) bool {
			err = unix.Sendto(int(fd), buf[o:at+n], 0, sa)
			return !errors.Is(err, unix.EAGAIN)
		})
		if err == nil {
			err = cerr
		}
	}
	if err != nil {
		// vipd's logger holds back repeats of one warning (ratelog).
		p.stats.sendErrors.Add(1)
		p.opts.Logger.Warn("tunprobe: send to backend", "backend", path.Backend, "err", err)
		return
	}
	p.stats.sent.Add(1)
}
