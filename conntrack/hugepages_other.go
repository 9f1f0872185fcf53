//go:build !linux

package conntrack

// adviseHugePages is a no-op off Linux; see hugepages_linux.go.
func adviseHugePages([]bucket) {}
