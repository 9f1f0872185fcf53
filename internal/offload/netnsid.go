package offload

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// netnsID returns the id that the namespace of the rtnetlink socket c gives
// the network namespace ns refers to (RTM_GETNSID with NETNSA_FD), or
// unix.NETNSA_NSID_NOT_ASSIGNED when it has given it none. Asking does not
// assign one.
func netnsID(c *netlink.Conn, ns *os.File) (int32, error) {
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(unix.NETNSA_FD, uint32(ns.Fd()))
	attrs, err := ae.Encode()
	if err != nil {
		return 0, err
	}
	req := netlink.Message{
		Header: netlink.Header{Type: unix.RTM_GETNSID, Flags: netlink.Request},
		// struct rtgenmsg (family AF_UNSPEC), padded to 4 bytes.
		Data: append(make([]byte, 4), attrs...),
	}
	msgs, err := c.Execute(req)
	if err != nil {
		return 0, err
	}
	for _, m := range msgs {
		if m.Header.Type != unix.RTM_NEWNSID || len(m.Data) < 4 {
			continue
		}
		ad, err := netlink.NewAttributeDecoder(m.Data[4:])
		if err != nil {
			return 0, err
		}
		for ad.Next() {
			if ad.Type() == unix.NETNSA_NSID {
				return int32(ad.Uint32()), nil
			}
		}
		if err := ad.Err(); err != nil {
			return 0, err
		}
	}
	return 0, errors.New("no NETNSA_NSID in the answer")
}

// netnsDir is where "ip netns add" binds named namespaces.
var netnsDir = "/run/netns"

// peerNetNS is a namespace found for an nsid.
type peerNetNS struct {
	f *os.File // open handle; the caller closes it
	// name is what a person uses to enter it: the "ip netns" name when it
	// has one, else a path for nsenter --net= (/proc/PID/ns/net).
	name string
}

// findNetNS looks for the network namespace that the namespace of c knows
// as nsid: first among the named namespaces (/run/netns), then among the
// namespaces of running processes (/proc/*/ns/net, which is where container
// namespaces without a name are), skipping the caller's own namespace
// (self, the caller's thread's /proc/thread-self/ns/net). It reports false
// when none matches; candidates it cannot open or ask about are passed
// over.
func findNetNS(c *netlink.Conn, nsid int32, self unix.Stat_t) (peerNetNS, bool) {
	seen := map[[2]uint64]bool{{self.Dev, self.Ino}: true}
	try := func(path, name string) (peerNetNS, bool) {
		var st unix.Stat_t
		if unix.Stat(path, &st) != nil || seen[[2]uint64{st.Dev, st.Ino}] {
			return peerNetNS{}, false
		}
		seen[[2]uint64{st.Dev, st.Ino}] = true
		f, err := os.Open(path)
		if err != nil {
			return peerNetNS{}, false
		}
		if id, err := netnsID(c, f); err == nil && id == nsid {
			return peerNetNS{f: f, name: name}, true
		}
		f.Close()
		return peerNetNS{}, false
	}

	if ents, err := os.ReadDir(netnsDir); err == nil {
		for _, e := range ents {
			if ns, ok := try(filepath.Join(netnsDir, e.Name()), e.Name()); ok {
				return ns, true
			}
		}
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return peerNetNS{}, false
	}
	for _, e := range procs {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		path := fmt.Sprintf("/proc/%s/ns/net", e.Name())
		if ns, ok := try(path, path); ok {
			return ns, true
		}
	}
	return peerNetNS{}, false
}
