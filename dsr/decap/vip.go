//go:build linux

package decap

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"

	"github.com/jsimonetti/rtnetlink/v2"
	"golang.org/x/sys/unix"
)

// vipSetup holds the VIPs New put on loopback, to be removed by Close.
//
// The rtnetlink socket stays open from New to Close for the same reason
// as the sysctl files (sysctlChange): it belongs to the namespace it was
// opened in, while Close may run on any thread.
type vipSetup struct {
	c     *rtnetlink.Conn
	lo    uint32                      // loopback's interface index
	added []*rtnetlink.AddressMessage // exactly the messages that added them
	log   *slog.Logger
}

// setupVIPs adds each of vips to the loopback interface, /32 or /128, as
// `ip addr add VIP/32 dev lo` does, and remembers which it added: one
// already there (same address and prefix length) is left alone, then and
// in undo. On error, what it added is removed again.
func setupVIPs(vips []netip.Addr, log *slog.Logger) (*vipSetup, error) {
	c, err := rtnetlink.Dial(nil)
	if err != nil {
		return nil, fmt.Errorf("decap: rtnetlink: %w", err)
	}
	v := &vipSetup{c: c, log: log}
	if v.lo, err = loopbackIndex(); err != nil {
		c.Close()
		return nil, err
	}
	for _, a := range vips {
		m := &rtnetlink.AddressMessage{
			Family:       unix.AF_INET,
			PrefixLength: uint8(a.BitLen()),
			Index:        v.lo,
			Attributes:   &rtnetlink.AddressAttributes{Address: net.IP(a.AsSlice()), Local: net.IP(a.AsSlice())},
		}
		if a.Is6() {
			// IPv6 messages carry IFA_ADDRESS only. Without IFA_F_NODAD
			// the address is tentative (no socket can bind it, the
			// stack does not answer it) until the kernel's DAD work
			// runs, even on loopback, where that work only clears the
			// flag: a busy host runs it late. The flag goes in
			// IFA_FLAGS, which the library always sends and the
			// kernel then prefers over the header's 8-bit flags.
			m.Family = unix.AF_INET6
			m.Attributes.Local = nil
			m.Attributes.Flags = unix.IFA_F_NODAD
		}
		// New asks with NLM_F_EXCL: EEXIST means the address was there.
		err := c.Address.New(m)
		if errors.Is(err, unix.EEXIST) {
			log.Info("VIP already on lo, left as is", "vip", a)
			continue
		}
		if err != nil {
			err = permHint(fmt.Errorf("decap: add VIP %v to lo: %w", a, err), "CAP_NET_ADMIN")
			return nil, errors.Join(err, v.undo())
		}
		v.added = append(v.added, m)
		log.Info("VIP added to lo", "vip", a)
	}
	return v, nil
}

// undo removes the addresses setupVIPs added (one removed meanwhile by
// someone else is no error) and closes the socket.
func (v *vipSetup) undo() error {
	var errs []error
	for i := len(v.added) - 1; i >= 0; i-- {
		m := v.added[i]
		err := v.c.Address.Delete(m)
		if errors.Is(err, unix.EADDRNOTAVAIL) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("decap: remove VIP %v from lo: %w", m.Attributes.Address, err))
			continue
		}
		v.log.Info("VIP removed from lo", "vip", m.Attributes.Address)
	}
	v.added = nil
	errs = append(errs, v.c.Close())
	return errors.Join(errs...)
}

// loopbackIndex returns the index of "lo" in the calling thread's
// namespace.
func loopbackIndex() (uint32, error) {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("decap: socket for ioctl: %w", err)
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return 0, err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFINDEX, ifr); err != nil {
		return 0, fmt.Errorf("decap: index of lo: %w", err)
	}
	return ifr.Uint32(), nil
}

// ARP settings a DSR backend needs while it holds VIPs on loopback. The
// kernel applies the maximum of conf/all and conf/<interface> for both,
// so raising all is enough for every interface, lo included, and a
// higher (stricter) value found is kept.
const (
	// arpIgnore 1: answer ARP only for addresses of the interface the
	// request came in on — never for a VIP on lo, which belongs to the
	// load balancer's MAC on that network.
	arpIgnore = 1
	// arpAnnounce 2: take the source of ARP requests from the outgoing
	// interface's addresses, never the VIP, which would teach neighbours
	// the backend's MAC for it.
	arpAnnounce = 2
)

// setupARPSysctls raises net.ipv4.conf.all.arp_ignore and arp_announce to
// what a DSR backend needs, recording each change in d.restore.
func (d *Decap) setupARPSysctls() error {
	for _, s := range []struct {
		key  string
		want int
	}{{"arp_ignore", arpIgnore}, {"arp_announce", arpAnnounce}} {
		p := conf("ipv4", "all", s.key)
		cur, err := readSysctl(p)
		if err != nil {
			return err
		}
		if cur >= s.want {
			continue
		}
		if err := d.changeSysctl(p, cur, s.want); err != nil {
			return err
		}
	}
	return nil
}
