package rig

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/vipd/vipd/internal/genl"
	"github.com/vipd/vipd/testing/nstest"
)

// NAPI is one NAPI instance of an interface, as the kernel's netdev
// generic-netlink family reports it.
type NAPI struct {
	ID  uint32
	PID int // its kthread when threaded, else 0
}

// netdev family (include/uapi/linux/netdev.h).
const (
	netdevCmdNAPIGet   = 11 // NETDEV_CMD_NAPI_GET
	netdevANAPIIfindex = 1  // NETDEV_A_NAPI_IFINDEX
	netdevANAPIID      = 2  // NETDEV_A_NAPI_ID
	netdevANAPIPID     = 4  // NETDEV_A_NAPI_PID
)

// ListNAPI dumps the NAPI instances of dev in ns. The kthread's PID comes
// from the kernel (NETDEV_A_NAPI_PID, 6.13 and later); on older kernels it
// is looked up by the kthread's name, napi/<dev>-<id>.
func ListNAPI(ns *nstest.NS, dev string) ([]NAPI, error) {
	var out []NAPI
	err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		c, err := netlink.Dial(unix.NETLINK_GENERIC, nil)
		if err != nil {
			return err
		}
		defer c.Close()
		fam, err := genl.Family(c, "netdev")
		if err != nil {
			return err
		}
		ae := netlink.NewAttributeEncoder()
		ae.Uint32(netdevANAPIIfindex, uint32(ifi.Index))
		attrs, err := ae.Encode()
		if err != nil {
			return err
		}
		msgs, err := c.Execute(genl.Request(fam, netdevCmdNAPIGet, netlink.Dump, attrs))
		if err != nil {
			return fmt.Errorf("netdev napi-get: %w", err)
		}
		for _, m := range msgs {
			ad, err := genl.Attributes(m)
			if err != nil {
				return err
			}
			var n NAPI
			idx := -1
			for ad.Next() {
				switch ad.Type() {
				case netdevANAPIIfindex:
					idx = int(ad.Uint32())
				case netdevANAPIID:
					n.ID = ad.Uint32()
				case netdevANAPIPID:
					n.PID = int(ad.Uint32())
				}
			}
			if err := ad.Err(); err != nil {
				return err
			}
			if idx == ifi.Index {
				out = append(out, n)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].PID == 0 {
			out[i].PID = kthreadByName(NAPIThreadName(dev, out[i].ID))
		}
	}
	return out, nil
}

// NAPIThreadName is the name the kernel gives a threaded NAPI's kthread
// (napi_kthread_create), cut to the 15 bytes of a task's comm.
func NAPIThreadName(dev string, id uint32) string {
	n := "napi/" + dev + "-" + strconv.FormatUint(uint64(id), 10)
	if len(n) > 15 {
		n = n[:15]
	}
	return n
}

// kthreadByName returns the PID of the kernel thread (a child of
// kthreadd, PID 2) called name, or 0.
func kthreadByName(name string) int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue
		}
		st, err := ParseTaskStat(string(b))
		if err != nil || st.Comm != name {
			continue
		}
		if f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+1:]); len(f) > 1 && f[1] == "2" {
			return pid
		}
	}
	return 0
}

// ThreadedNAPI switches dev's receive NAPI in ns to threaded mode
// (/sys/class/net/DEV/threaded), pins every NAPI kthread to cpu and
// returns their PIDs. dev must have NAPI instances: a veth has them when
// an XDP program is attached or GRO is on (EnableGRO). It fails when no
// kthread appears.
func ThreadedNAPI(t nstest.T, ns *nstest.NS, dev string, cpu int) []int {
	t.Helper()
	Sysfs(t, ns, dev, "threaded", "1")
	napis, err := ListNAPI(ns, dev)
	if err != nil {
		t.Fatalf("rig: NAPI of %s: %v", dev, err)
	}
	var pids []int
	for _, n := range napis {
		if n.PID == 0 {
			continue
		}
		if err := PinTo(n.PID, cpu); err != nil {
			t.Fatalf("rig: pin %s (pid %d) to CPU %d: %v", NAPIThreadName(dev, n.ID), n.PID, cpu, err)
		}
		pids = append(pids, n.PID)
	}
	if len(pids) == 0 {
		t.Fatalf("rig: no threaded NAPI kthread for %s in %s (NAPI instances: %+v)", dev, ns.Name, napis)
	}
	return pids
}

// PinTo sets pid's CPU affinity to cpu alone and checks that it held.
func PinTo(pid, cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(pid, &set); err != nil {
		return err
	}
	var got unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &got); err != nil {
		return err
	}
	if got.Count() != 1 || !got.IsSet(cpu) {
		return errors.New("affinity did not hold")
	}
	return nil
}

// EnableGRO turns on GRO on dev in ns (ETHTOOL_SGRO). On a veth that gives
// the receive side NAPI without an XDP program, so that the kernel's own
// paths (nftables, AF_PACKET) can be threaded like the XDP ones.
func EnableGRO(t nstest.T, ns *nstest.NS, dev string) {
	t.Helper()
	err := ns.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		ev := struct{ cmd, data uint32 }{unix.ETHTOOL_SGRO, 1}
		var ifr [40]byte // struct ifreq: name[16], then a pointer
		copy(ifr[:16], dev)
		*(*uintptr)(unsafe.Pointer(&ifr[16])) = uintptr(unsafe.Pointer(&ev))
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); errno != 0 {
			return fmt.Errorf("ethtool gro on %s: %w", dev, errno)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("rig: %v", err)
	}
}
