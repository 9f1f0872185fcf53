package offload

import (
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Check reports whether the interface called ifname, in the network
// namespace of the calling goroutine's thread, is a veth, where its peer
// is, and whether the peer has TX checksum offload on. A peer in a
// namespace that cannot be found or entered gives a Report with
// PeerReachable false, not an error. Errors are failures to ask the kernel
// at all (no such interface: the error wraps unix.ENODEV); vipd should log
// them as warnings and go on.
//
// Reading a peer in another namespace needs the privilege to enter it
// (CAP_SYS_ADMIN) and to open other processes' /proc/PID/ns/net; without
// it the peer is reported unreachable.
func Check(ifname string) (Report, error) {
	r := Report{Interface: ifname, PeerNetNSID: -1}
	c, err := netlink.Dial(unix.NETLINK_ROUTE, nil)
	if err != nil {
		return r, fmt.Errorf("offload: rtnetlink: %w", err)
	}
	defer c.Close()
	l, err := readLink(c, ifname)
	if err != nil {
		return r, err
	}
	if l.kind != "veth" {
		return r, nil
	}
	r.IsVeth, r.PeerIndex, r.PeerNetNSID = true, l.peer, int(l.nsid)
	if l.peer == 0 {
		r.Unreachable = "it has no peer"
		return r, nil
	}

	var fd int
	if l.nsid < 0 {
		if fd, err = ioctlSocket(); err != nil {
			return r, err
		}
	} else {
		var self unix.Stat_t
		if err := unix.Stat("/proc/thread-self/ns/net", &self); err != nil {
			return r, fmt.Errorf("offload: own network namespace: %w", err)
		}
		ns, ok := findNetNS(c, l.nsid, self)
		if !ok {
			r.Unreachable = fmt.Sprintf("no named namespace (%s) and no process vipd may inspect (/proc/*/ns/net) is in it", netnsDir)
			return r, nil
		}
		defer ns.f.Close()
		r.PeerNetNS = ns.name
		if fd, err = ioctlSocketIn(ns.f); err != nil {
			r.Unreachable = err.Error()
			return r, nil
		}
	}
	defer unix.Close(fd)

	name, err := nameOf(fd, l.peer)
	if err != nil {
		return r, err
	}
	on, err := txChecksum(fd, name)
	if err != nil {
		return r, err
	}
	r.PeerName, r.PeerReachable, r.PeerTxChecksum = name, true, on
	return r, nil
}
