package xdpprog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf/asm"
	"github.com/vipd/vipd/testing/fdleak"
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
	insns := instructions(fast, fast, fastClock())
	symbols := make(map[string]int)
	for i, ins := range insns {
		if s := ins.Symbol(); s != "" {
			if _, dup := symbols[s]; dup {
				t.Errorf("label %q defined twice", s)
			}
			symbols[s] = i
		}
	}
	specs := specs(1, n, n)
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

// TestFastLayout pins the byte layout of the fast path's keys and entries
// that the program reads by offset.
func TestFastLayout(t *testing.T) {
	k := FastKey4{Src: [4]byte{198, 18, 0, 1}, Dst: [4]byte{198, 18, 0, 100}, SrcPort: 0x1234, DstPort: 80, Proto: 6}.marshal()
	if want := (fastKey{198, 18, 0, 1, 198, 18, 0, 100, 0x12, 0x34, 0, 80, 6}); k != want {
		t.Errorf("key % x, want % x", k, want)
	}
	v := FastEntry4{Gen: 7, Expires: 9, Addr: [4]byte{1, 2, 3, 4}, Port: 8080, IPSum: 0x1fffe, L4Sum: 0x12345,
		MACs: [12]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, MaxLen: 1480, Ifindex: 3, In: 0x10203, Ref: 5,
		Encap: true, EncapSrc: [4]byte{5, 6, 7, 8}, OuterSum: 0xabcdef}
	b := v.marshal()
	ne := binary.NativeEndian
	checks := []struct {
		name      string
		got, want uint64
	}{
		{"gen", uint64(ne.Uint32(b[fvGen:])), 7},
		{"addr", uint64(binary.BigEndian.Uint32(b[fvAddr:])), 0x01020304},
		{"expires", ne.Uint64(b[fvExpires:]), 9},
		{"first MAC byte", uint64(b[fvMACs]), 1},
		{"last MAC byte", uint64(b[fvMACs+11]), 12},
		{"port", uint64(binary.BigEndian.Uint16(b[fvPort:])), 8080},
		{"IP sum, folded", uint64(binary.BigEndian.Uint16(b[fvIPSum:])), 0xffff},
		{"L4 sum, folded", uint64(binary.BigEndian.Uint16(b[fvL4Sum:])), 0x2346},
		{"max length", uint64(ne.Uint16(b[fvMaxLen:])), 1480},
		{"ifindex", uint64(ne.Uint32(b[fvIfindex:])), 3},
		{"ref", uint64(ne.Uint32(b[fvRef:])), 5},
		{"encap source", uint64(binary.BigEndian.Uint32(b[fvSrc:])), 0x05060708},
		{"mode", uint64(b[fvMode]), modeIPIP},
		{"outer sum, folded", uint64(ne.Uint16(b[fvOutSum:])), 0xab + 0xcdef},
		{"in", uint64(ne.Uint32(b[fvIn:])), 0x10203},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %#x, want %#x", c.name, c.got, c.want)
		}
	}
	if fvIn+4 > fastValueSize || fvGen%4 != 0 || fvExpires%8 != 0 || fvIn%4 != 0 || fvOutSum%2 != 0 || fvMode >= fvOutSum {
		t.Error("fields misaligned, overlapping or past the value")
	}
	v.GUE, v.GUESrcPort, v.GUEDstPort = true, 0xc123, 6080
	if b := v.marshal(); b[fvMode] != modeGUE || binary.BigEndian.Uint16(b[fvGUESrcPort:]) != 0xc123 ||
		binary.BigEndian.Uint16(b[fvGUEDstPort:]) != 6080 || binary.BigEndian.Uint32(b[fvSrc:]) != 0x05060708 {
		t.Errorf("GUE: mode %d, ports %#x → %d", b[fvMode], binary.BigEndian.Uint16(b[fvGUESrcPort:]), binary.BigEndian.Uint16(b[fvGUEDstPort:]))
	}
	v.Encap, v.GUE, v.SNAT = false, false, true
	if b := v.marshal(); b[fvMode] != modeSNAT {
		t.Errorf("SNAT mode %d, want %d", b[fvMode], modeSNAT)
	}
	v.SNAT = false
	if b := v.marshal(); b[fvMode] != modeDNAT {
		t.Errorf("DNAT mode %d, want %d", b[fvMode], modeDNAT)
	}
}

// TestFastLayout6 pins the IPv6 key and entry layouts.
func TestFastLayout6(t *testing.T) {
	src, dst := netip.MustParseAddr("2001:2::1").As16(), netip.MustParseAddr("2001:2::100").As16()
	k := FastKey6{Src: src, Dst: dst, SrcPort: 0x1234, DstPort: 80, Proto: 17}.marshal()
	var want fastKey6
	copy(want[0:], src[:])
	copy(want[16:], dst[:])
	want[32], want[33], want[35], want[36] = 0x12, 0x34, 80, 17
	if k != want {
		t.Errorf("key % x, want % x", k, want)
	}
	addr, esrc := netip.MustParseAddr("2001:2:1::11").As16(), netip.MustParseAddr("2001:2:1::fe").As16()
	v := FastEntry6{Gen: 7, Expires: 9, Addr: addr, Port: 8080, L4Sum: 0x12345, MACs: [12]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12},
		MaxLen: 1460, Ifindex: 3, In: 4, Ref: 5, Encap: true, EncapSrc: esrc, FlowLabel: 0xfff12345}
	b := v.marshal()
	ne := binary.NativeEndian
	if ne.Uint32(b[fvGen:]) != 7 || ne.Uint64(b[fvExpires:]) != 9 || b[fvMACs+11] != 12 ||
		binary.BigEndian.Uint16(b[fvPort:]) != 8080 || binary.BigEndian.Uint16(b[fvL4Sum:]) != 0x2346 ||
		ne.Uint16(b[fvMaxLen:]) != 1460 || ne.Uint32(b[fvIfindex:]) != 3 || ne.Uint32(b[fvIn:]) != 4 || ne.Uint32(b[fvRef:]) != 5 ||
		b[fvMode] != modeIPIP || ne.Uint32(b[fvLabel6:]) != 0x12345 ||
		[16]byte(b[fvAddr6:fvAddr6+16]) != addr || [16]byte(b[fvSrc6:fvSrc6+16]) != esrc {
		t.Errorf("entry % x", b)
	}
	if fvAddr6%4 != 0 || fvSrc6%4 != 0 || fvSrc6+16 != fastValueSize6 {
		t.Error("IPv6 fields misaligned or past the value")
	}
	v.Encap, v.SNAT = false, true
	if b := v.marshal(); b[fvMode] != modeSNAT || ne.Uint32(b[fvLabel6:]) != 0 {
		t.Errorf("SNAT: mode %d", b[fvMode])
	}
}
