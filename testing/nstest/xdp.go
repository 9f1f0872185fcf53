package nstest

import (
	"fmt"
	"net"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// XDPPass attaches an XDP program that passes every frame to interface
// ifname in the namespace (native mode), for as long as the test runs.
//
// On a veth it decides whether frames an XDP program on the peer sends
// (XDP_TX, bpf_redirect into it) arrive at all: the veth takes them only
// into a receive queue whose NAPI runs, and an XDP program of its own
// starts it. (GRO on does too for redirects, but on Linux 6.18 frames
// sent back with XDP_TX were still lost: measured, with a UDP socket
// behind the veth.) Physical NICs need nothing of the kind.
func (n *NS) XDPPass(tb T, ifname string) {
	tb.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "nstest_pass", Type: ebpf.XDP,
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()}, // XDP_PASS
	})
	if err != nil {
		tb.Fatalf("nstest: XDP_PASS program: %v", err)
	}
	var l link.Link
	err = n.Do(func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		l, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifi.Index, Flags: link.XDPDriverMode})
		return err
	})
	if err != nil {
		prog.Close()
		tb.Fatalf("nstest: %v", fmt.Errorf("attach XDP_PASS to %s in %s: %w", ifname, n.Name, err))
	}
	tb.Cleanup(func() {
		l.Close()
		prog.Close()
	})
}
