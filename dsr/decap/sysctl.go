//go:build linux

package decap

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// procSys is where the calling thread's network namespace shows its
// sysctls: /proc/sys/net resolves against the namespace of the task that
// opens the file, so New reads and writes the namespace it runs in.
const procSys = "/proc/sys/net/"

// conf returns the path of net.<family>.conf.<ifname>.<key>. Interface
// names may contain dots, which is why paths are joined here rather than
// translated from the dotted form.
func conf(family, ifname, key string) string {
	return procSys + family + "/conf/" + ifname + "/" + key
}

// sysctlName returns the dotted name of a conf path, for messages.
func sysctlName(path string) string {
	return strings.ReplaceAll(strings.TrimPrefix(path, "/proc/sys/"), "/", ".")
}

func readSysctl(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("decap: read %s: %w", sysctlName(path), err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("decap: read %s: %w", sysctlName(path), err)
	}
	return v, nil
}

func writeSysctl(path string, v int) error {
	// O_WRONLY without O_CREATE: a missing sysctl is an error, not a file.
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("decap: set %s=%d: %w", sysctlName(path), v, err)
	}
	_, err = f.WriteString(strconv.Itoa(v))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("decap: set %s=%d: %w", sysctlName(path), v, err)
	}
	return nil
}

// sysctlChange is a host-wide setting New changed and Close puts back.
//
// The file stays open from New to Close because a sysctl file belongs to
// the namespace it was opened in: Close may run on any thread, in any
// namespace, and reopening the path there would change that namespace's
// setting instead.
type sysctlChange struct {
	f        *os.File
	old, new int
}

func (c sysctlChange) read() (int, error) {
	var b [32]byte
	n, err := c.f.ReadAt(b[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("decap: read %s: %w", sysctlName(c.f.Name()), err)
	}
	return strconv.Atoi(strings.TrimSpace(string(b[:n])))
}

// restoreSysctls puts back the changes in reverse order, skipping any that
// someone else changed meanwhile, and closes their files.
func restoreSysctls(changes []sysctlChange) error {
	var errs []error
	for i := len(changes) - 1; i >= 0; i-- {
		c := changes[i]
		cur, err := c.read()
		switch {
		case errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT):
			// The interface is gone.
		case err != nil:
			errs = append(errs, err)
		case cur == c.new:
			if _, err := c.f.WriteAt([]byte(strconv.Itoa(c.old)), 0); err != nil {
				errs = append(errs, fmt.Errorf("decap: restore %s=%d: %w", sysctlName(c.f.Name()), c.old, err))
			}
		}
		c.f.Close()
	}
	return errors.Join(errs...)
}

// setupSysctls makes the kernel accept what is written to the TUN
// device (docs/decap.md, "What it sets on the host, and why", says why
// each setting is needed). The TUN's own settings die with the device;
// host-wide ones are recorded in d.restore when changed.
func (d *Decap) setupSysctls() error {
	tun := d.opts.TUN
	// The inner source is a client whose route does not point at the TUN:
	// reverse-path filtering must be off for it. The kernel filters with
	// max(all, <tun>), so all must be 0 too.
	if err := writeSysctl(conf("ipv4", tun, "rp_filter"), 0); err != nil {
		return err
	}
	if err := d.setupAllRPFilter(); err != nil {
		return err
	}
	if !d.opts.Forwarding {
		if err := d.pin(conf("ipv4", tun, "forwarding"), 0); err != nil {
			return err
		}
	}
	v6 := 0
	if !d.opts.IPv6 {
		// Without IPv6 decapsulation the TUN needs no IPv6: disabling it
		// keeps the kernel from sending router solicitations and MLD
		// reports into a device nobody reads, and drops any IPv6
		// packet written to it.
		v6 = 1
	}
	if err := writeSysctl(conf("ipv6", tun, "disable_ipv6"), v6); err != nil {
		if errors.Is(err, fs.ErrNotExist) && !d.opts.IPv6 {
			return nil // IPv6 disabled at boot (ipv6.disable=1)
		}
		return err
	}
	if d.opts.IPv6 && !d.opts.Forwarding {
		if err := d.pin(conf("ipv6", tun, "forwarding"), 0); err != nil {
			return err
		}
		// Since Linux 6.17 the one per-interface IPv6 setting that
		// makes the kernel forward: it follows default's on a new
		// device. Older kernels lack it.
		if err := d.pin(conf("ipv6", tun, "force_forwarding"), 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		d.warnIPv6Forwarding()
	}
	return nil
}

// pinned is a sysctl of the TUN device that New set and Run keeps at its
// value. The file stays open for the reason sysctlChange's does.
type pinned struct {
	f    *os.File
	want int
}

// pin sets the sysctl at path to v and records it in d.pinned, for
// checkPinned. Nothing is restored: the TUN's settings die with it.
func (d *Decap) pin(path string, v int) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("decap: set %s=%d: %w", sysctlName(path), v, err)
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(v)), 0); err != nil {
		f.Close()
		return fmt.Errorf("decap: set %s=%d: %w", sysctlName(path), v, err)
	}
	d.pinned = append(d.pinned, pinned{f: f, want: v})
	return nil
}

// checkPinned puts back the pinned sysctls that changed. The TUN's
// forwarding does not stay as New set it by itself: a write that turns
// net.ipv4.ip_forward (or conf.all.forwarding) from 0 to 1, as Docker's
// start does, copies 1 to every interface, and so does any write of
// net.ipv6.conf.all.forwarding.
func (d *Decap) checkPinned() {
	for _, p := range d.pinned {
		var b [32]byte
		n, err := p.f.ReadAt(b[:], 0)
		if err != nil && !errors.Is(err, io.EOF) {
			if !d.closed.Load() {
				d.opts.Logger.Warn("sysctl check failed", "name", sysctlName(p.f.Name()), "err", err)
			}
			continue
		}
		v, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
		if err != nil || v == p.want {
			continue
		}
		if _, err := p.f.WriteAt([]byte(strconv.Itoa(p.want)), 0); err != nil {
			if !d.closed.Load() {
				d.opts.Logger.Warn("sysctl reset failed", "name", sysctlName(p.f.Name()), "err", err)
			}
			continue
		}
		d.opts.Logger.Warn("sysctl changed by someone else, set back", "name", sysctlName(p.f.Name()), "found", v, "set", p.want)
	}
}

// closePinned closes the pinned sysctls' files.
func (d *Decap) closePinned() {
	for _, p := range d.pinned {
		p.f.Close()
	}
}

// warnIPv6Forwarding logs, when CheckLocal is off and the host forwards
// IPv6, that the TUN's forwarding=0 does not stop it: Linux decides
// whether to forward IPv6 by net.ipv6.conf.all.forwarding (and an
// interface's force_forwarding) alone, not by the input interface's
// forwarding as for IPv4 (measured on Linux 6.18).
func (d *Decap) warnIPv6Forwarding() {
	if d.opts.CheckLocal {
		return
	}
	if v, err := readSysctl(conf("ipv6", "all", "forwarding")); err == nil && v != 0 {
		d.opts.Logger.Warn("net.ipv6.conf.all.forwarding is on and CheckLocal off: inner IPv6 packets for other hosts " +
			"are routed on, the TUN's forwarding=0 does not stop IPv6 (CheckLocal, -check-local, does)")
	}
}

// setupAllRPFilter checks net.ipv4.conf.all.rp_filter and, with
// FixSysctls, sets it to 0 while raising every other interface's own value
// (and default's, for interfaces created later) to the old one, so that
// only the TUN loses reverse-path filtering.
func (d *Decap) setupAllRPFilter() error {
	allPath := conf("ipv4", "all", "rp_filter")
	all, err := readSysctl(allPath)
	if err != nil {
		return err
	}
	if all == 0 {
		return nil
	}
	if !d.opts.FixSysctls {
		return fmt.Errorf("decap: net.ipv4.conf.all.rp_filter is %d: the kernel would drop every decapsulated packet "+
			"(it filters with the maximum of all and the TUN's value, and loose mode also drops on a TUN without an address). "+
			"Run `sysctl -w net.ipv4.conf.all.rp_filter=0` after setting rp_filter=%d on each interface that should keep it, "+
			"or run with -fix-sysctls (Options.FixSysctls), which does both", all, all)
	}
	entries, err := os.ReadDir(procSys + "ipv4/conf")
	if err != nil {
		return fmt.Errorf("decap: list interfaces: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if name == "all" || name == d.opts.TUN {
			continue
		}
		p := conf("ipv4", name, "rp_filter")
		v, err := readSysctl(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since the listing
		}
		if err != nil {
			return err
		}
		if v >= all {
			continue
		}
		if err := d.changeSysctl(p, v, all); err != nil {
			return err
		}
	}
	return d.changeSysctl(allPath, all, 0)
}

func (d *Decap) changeSysctl(path string, old, new int) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("decap: set %s=%d: %w", sysctlName(path), new, err)
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(new)), 0); err != nil {
		f.Close()
		return fmt.Errorf("decap: set %s=%d: %w", sysctlName(path), new, err)
	}
	d.restore = append(d.restore, sysctlChange{f: f, old: old, new: new})
	d.opts.Logger.Info("sysctl changed", "name", sysctlName(path), "from", old, "to", new)
	return nil
}
