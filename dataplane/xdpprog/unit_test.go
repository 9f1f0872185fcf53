package xdpprog

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf/asm"
	"github.com/vipd/vipd/internal/fdleak"
)

// TestMain fails the run when a test leaks a file descriptor: a leaked
// BPF link, program, map or AF_XDP socket keeps something of vipd's in
// the kernel.
func TestMain(m *testing.M) { fdleak.Main(m) }

// TestProgramReferences checks the assembled program without a kernel:
// every jump lands on a label, no label is defined twice, and every map
// the program loads is one Load creates.
func TestProgramReferences(t *testing.T) {
	for _, fast := range []bool{false, true} {
		t.Run(fmt.Sprintf("fast=%v", fast), func(t *testing.T) { checkReferences(t, fast) })
	}
}

func checkReferences(t *testing.T, fast bool) {
	n := 0
	if fast {
		n = 1
	}
	insns := instructions(fast)
	symbols := make(map[string]int)
	for i, ins := range insns {
		if s := ins.Symbol(); s != "" {
			if _, dup := symbols[s]; dup {
				t.Errorf("label %q defined twice", s)
			}
			symbols[s] = i
		}
	}
	specs := specs(1, n)
	used := make(map[string]bool)
	for i, ins := range insns {
		ref := ins.Reference()
		switch {
		case ins.OpCode == asm.InvalidOpCode:
			t.Errorf("instruction %d is invalid", i)
		case ref == "":
		case ins.IsLoadFromMap():
			if specs[ref] == nil {
				t.Errorf("instruction %d loads unknown map %q", i, ref)
			}
			used[ref] = true
		default:
			if j, ok := symbols[ref]; !ok {
				t.Errorf("instruction %d jumps to undefined label %q", i, ref)
			} else if j <= i {
				t.Errorf("instruction %d jumps back to %q: the program has no loops", i, ref)
			}
		}
	}
	for name := range specs {
		if !used[name] {
			t.Errorf("map %s is created but never used", name)
		}
	}
	if insns[0].Symbol() != progName {
		t.Errorf("first instruction is labelled %q, want %q", insns[0].Symbol(), progName)
	}
}

// TestKeyLayout pins the byte layout the program writes on its stack.
func TestKeyLayout(t *testing.T) {
	k := replyKeyOf(keyOf(netip.MustParseAddr("198.18.2.1")), 17, 0x1f90)
	want := replyKey{10: 0xff, 11: 0xff, 12: 198, 13: 18, 14: 2, 15: 1, 16: 17, 17: 0, 18: 0x1f, 19: 0x90}
	if k != want {
		t.Errorf("reply key % x, want % x", k, want)
	}
	if stackReplyProto-stackReplyKey != 16 || stackReplyPort-stackReplyKey != 18 || stackReplyPort%2 != 0 {
		t.Error("stack offsets do not match replyKey")
	}
	if stackReplyKey+len(replyKey{}) > stackDstKey {
		t.Error("the reply key overlaps the address key")
	}
	if keyOf(netip.MustParseAddr("::ffff:198.18.1.1")) != keyOf(netip.MustParseAddr("198.18.1.1")) {
		t.Error("an IPv4-mapped address and its IPv4 address have different keys")
	}
}

// TestBuild checks Update's validation without a kernel.
func TestBuild(t *testing.T) {
	a := netip.MustParseAddr("198.18.2.1")
	c, err := build(addrs(vip4, vip4, vip6), []ReplyKey{{a, 6, 80}, {a, 6, 443}, {a, 17, 0}}, addrs(local4))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.vips) != 2 || len(c.replies) != 3 || len(c.hosts) != 2 || len(c.local) != 1 {
		t.Errorf("sizes %d %d %d %d, want 2 3 2 1", len(c.vips), len(c.replies), len(c.hosts), len(c.local))
	}
	if _, ok := c.hosts[replyKeyOf(keyOf(a), 6, 0)]; !ok {
		t.Error("no host key for TCP")
	}
	big := make([]netip.Addr, MaxVIPs+1)
	for i := range big {
		big[i] = netip.AddrFrom4([4]byte{198, 19, byte(i >> 8), byte(i)})
	}
	if _, err := build(big, nil, nil); !errors.Is(err, ErrCapacity) {
		t.Errorf("%d VIPs: %v, want ErrCapacity", len(big), err)
	}
	if _, err := build(big[:MaxVIPs], nil, nil); err != nil {
		t.Errorf("%d VIPs: %v", MaxVIPs, err)
	}
	if _, err := build(nil, []ReplyKey{{a, 1, 0}}, nil); err == nil {
		t.Error("an ICMP reply key was accepted")
	}
}

func TestModeString(t *testing.T) {
	for m, want := range map[Mode]string{Auto: "auto", Native: "native", Generic: "generic", Mode(9): "Mode(9)"} {
		if m.String() != want {
			t.Errorf("%d: %q, want %q", int(m), m.String(), want)
		}
	}
}
