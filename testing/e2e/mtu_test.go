package e2e

import (
	"strings"
	"testing"

	"github.com/vipd/vipd/testing/testbed"
)

// TestPathMTU: the link toward the backends is smaller than the client's
// (box eth1 MTU 1400, read by vipd through rtnetlink). The client's
// 1500-byte segments do not fit — in NAT mode the backends advertise a
// 1460-byte MSS, in DSR mode encapsulation adds 20 bytes — so vipd answers
// fragmentation-needed and the client's TCP adapts: a 16 MiB upload with DF
// set completes, and the ICMP counter shows it.
func TestPathMTU(t *testing.T) {
	e := setup(t, testbed.Options{BoxEgressMTU: 1400}, testbed.ConfigOptions{})
	for _, url := range []string{natURL, dsrURL} {
		before := e.metric("vipd_icmp_sent_total")
		if _, err := e.upload(url, 16<<20); err != nil {
			t.Fatalf("upload to %s: %v", url, err)
		}
		if after := e.eventually(func(v float64) bool { return v > before }, "vipd_icmp_sent_total"); after <= before {
			t.Errorf("%s: no fragmentation-needed sent (icmp_sent %v -> %v)", url, before, after)
		}
	}
	if v := e.eventually(func(v float64) bool { return v > 0 }, "vipd_drops_total", "reason", "too_big"); v == 0 {
		t.Errorf("too_big drops not counted")
	}
}

// TestICMPFromNetwork: the router's link toward the client is smaller
// (1300) than what backends send, so the router sends ICMP
// fragmentation-needed to the VIP (the source of the replies). vipd must
// steer each error to the backend that owns the flow, or the download
// stalls (a PMTU black hole).
func TestICMPFromNetwork(t *testing.T) {
	e := setup(t, testbed.Options{ClientLinkMTU: 1300}, testbed.ConfigOptions{})
	for _, url := range []string{natURL, dsrURL} {
		before := e.metric("vipd_icmp_steered_total")
		if _, err := e.download(url, 16<<20); err != nil {
			t.Fatalf("download from %s: %v", url, err)
		}
		if after := e.eventually(func(v float64) bool { return v > before }, "vipd_icmp_steered_total"); after <= before {
			t.Errorf("%s: no ICMP error steered (%v -> %v)", url, before, after)
		}
	}
}

// TestMTUChange: vipd follows the egress interface's MTU while it runs
// (rtnetlink link notifications): lowering it makes the next large NAT
// packets draw fragmentation-needed. (NAT, because DSR draws them even at
// equal MTUs: encapsulation adds 20 bytes to a full-size packet.)
func TestMTUChange(t *testing.T) {
	e := setup(t, testbed.Options{}, testbed.ConfigOptions{})
	m := e.markNAT("web-nat", append(e.backendNS(), e.bed.Client)...)
	if _, err := e.upload(natURL, 1<<20); err != nil {
		t.Fatal(err)
	}
	if v := testbed.Metric(e.settled(m), "vipd_icmp_sent_total"); v != 0 {
		t.Fatalf("frag-needed sent before the MTU changed: %v", v)
	}
	e.bed.Box.Must(t, "ip", "link", "set", "eth1", "mtu", "1400")
	e.bed.Switch.Must(t, "ip", "link", "set", "sbox", "mtu", "1400")
	waitFor(t, patience, "vipd to notice the MTU change", func() bool { return strings.Contains(e.v.Log(), "interface MTU changed") })
	if _, err := e.upload(natURL, 4<<20); err != nil {
		t.Fatal(err)
	}
	if v := e.eventually(func(v float64) bool { return v > 0 }, "vipd_icmp_sent_total"); v == 0 {
		t.Errorf("no fragmentation-needed after the egress MTU dropped to 1400")
	}
}
