package testbed

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"

	"github.com/vipd/vipd/testing/nstest"
)

// Ping sends count ICMP echo requests from ns to dst and returns how many
// were answered, each waited for at most timeout (no ping binary needed).
func Ping(ns *nstest.NS, dst netip.Addr, count int, timeout time.Duration) (int, error) {
	var c *icmp.PacketConn
	if err := ns.Do(func() (err error) {
		c, err = icmp.ListenPacket("ip4:icmp", "0.0.0.0")
		return err
	}); err != nil {
		return 0, err
	}
	defer c.Close()
	id := os.Getpid() & 0xffff
	got := 0
	for seq := 1; seq <= count; seq++ {
		m := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: id, Seq: seq, Data: []byte("vipd-testbed")}}
		b, _ := m.Marshal(nil)
		if _, err := c.WriteTo(b, &net.IPAddr{IP: net.IP(dst.AsSlice())}); err != nil {
			return got, err
		}
		deadline := time.Now().Add(timeout)
		for time.Now().Before(deadline) {
			c.SetReadDeadline(deadline)
			buf := make([]byte, 1500)
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				break
			}
			r, err := icmp.ParseMessage(1, buf[:n])
			if err != nil || r.Type != ipv4.ICMPTypeEchoReply || from.String() != dst.String() {
				continue
			}
			if e, ok := r.Body.(*icmp.Echo); ok && e.ID == id && e.Seq == seq {
				got++
				break
			}
		}
	}
	if got == 0 {
		return 0, fmt.Errorf("no echo reply from %v", dst)
	}
	return got, nil
}
