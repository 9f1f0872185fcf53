// Package fdleak makes a test binary fail when its tests leave file
// descriptors open: in vipd a leaked descriptor is a socket that keeps
// receiving, a TUN device that stays, or a BPF program, map or link that
// keeps something of vipd's in the kernel.
package fdleak
