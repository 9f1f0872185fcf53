package arp

import (
	"net/netip"
	"slices"

	"github.com/vipd/vipd/internal/linkwatch"
)

// OnLinkPrefixes returns the prefixes the kernel reaches directly on the
// interface called ifname: the main table's unicast routes through it without
// a gateway, both families (connected subnets, fe80::/64, and any route added
// with "dev" only). A destination inside one of them is a neighbor; any other
// goes through a gateway. The prefixes are masked and sorted.
func OnLinkPrefixes(ifname string) ([]netip.Prefix, error) {
	k, err := dialKernel()
	if err != nil {
		return nil, err
	}
	defer k.Close()
	return onLinkPrefixes(k, ifname)
}

func onLinkPrefixes(k kernel, ifname string) ([]netip.Prefix, error) {
	links, err := k.Links()
	if err != nil {
		return nil, err
	}
	l, err := linkwatch.Find(links, ifname)
	if err != nil {
		return nil, err
	}
	routes, err := k.Routes()
	if err != nil {
		return nil, err
	}
	var ps []netip.Prefix
	for _, r := range routes {
		if r.Ifindex == l.Index && !r.Gateway.IsValid() && r.Dst.IsValid() && !slices.Contains(ps, r.Dst) {
			ps = append(ps, r.Dst)
		}
	}
	linkwatch.SortPrefixes(ps)
	return ps, nil
}
