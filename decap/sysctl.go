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

// setupSysctls makes the kernel accept what is written to the TUN device
// (see the package documentation for why each setting is needed). The
// TUN's own settings die with the device; host-wide ones are recorded in
// d.restore when changed.
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
	v6 := 0
	if !d.opts.IPv6 {
		// Without IPv6 decapsulation the TUN needs no IPv6: disabling it
		// keeps the kernel from sending router solicitations and MLD
		// reports into a device nobody reads.
		v6 = 1
	}
	if err := writeSysctl(conf("ipv6", tun, "disable_ipv6"), v6); err != nil {
		if errors.Is(err, fs.ErrNotExist) && !d.opts.IPv6 {
			return nil // IPv6 disabled at boot (ipv6.disable=1)
		}
		return err
	}
	return nil
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
