package conntrack

import (
	"testing"
	"unsafe"
)

// The memory budget (40 B/flow) and the one-line metadata rely on these sizes.
func TestLayout(t *testing.T) {
	if got := unsafe.Sizeof(Key{}); got != 24 {
		t.Errorf("Key is %d bytes, want 24 (no padding: equality is a memory compare)", got)
	}
	if got := unsafe.Alignof(Key{}); got != 8 {
		t.Errorf("Key is %d-byte aligned, want 8 (equal loads words)", got)
	}
	if got := unsafe.Sizeof(record{}); got != 32 {
		t.Errorf("record is %d bytes, want 32 (two per cache line)", got)
	}
	if got := unsafe.Offsetof(bucket{}.recs); got != 64 {
		t.Errorf("records start at byte %d, want 64 (metadata is one cache line)", got)
	}
	if got := unsafe.Sizeof(bucket{}); got != bucketBytes {
		t.Errorf("bucket is %d bytes, want bucketBytes=%d", got, bucketBytes)
	}
}

func TestTagLanes(t *testing.T) {
	var b bucket
	tags := []uint16{1, 0, 0xffff, 0x8000, 0x7fff, 1, 0, 0x0100}
	for i, v := range tags {
		b.setTag(i, v)
	}
	for i, v := range tags {
		if got := b.tag(i); got != v {
			t.Errorf("tag(%d) = %#x, want %#x", i, got, v)
		}
	}
	for _, v := range []uint16{0, 1, 0xffff, 0x8000, 0x7fff, 0x0100, 0x1234} {
		var want uint32
		for i, w := range tags {
			if w == v {
				want |= 1 << i
			}
		}
		if got := b.match(v); got != want {
			t.Errorf("match(%#x) = %08b, want %08b", v, got, want)
		}
	}
	if got, want := b.used(), uint32(0b1011_1101); got != want {
		t.Errorf("used() = %08b, want %08b", got, want)
	}
}

// TestFindSlots: find returns the slot holding a key whatever the other
// slots' tags (every subset of the eight slots sharing the key's tag, the
// rest free or tagged otherwise), and -1 for a key with the tag that no
// slot holds.
func TestFindSlots(t *testing.T) {
	const tag = 0x8001
	key := func(i int) Key { return Key{SrcPort: uint16(1000 + i), DstPort: 80, Proto: protoTCP} }
	for set := range 1 << slotsPerBucket {
		var b bucket
		for i := range slotsPerBucket {
			b.recs[i].key = key(i)
			switch {
			case set>>i&1 != 0:
				b.setTag(i, tag)
			case i%2 == 0:
				b.setTag(i, tag^0x0100) // used, another tag
			}
		}
		for i := range slotsPerBucket {
			k := key(i)
			want := -1
			if set>>i&1 != 0 {
				want = i
			}
			if got := b.find(tag, &k); got != want {
				t.Fatalf("slots %08b with the tag: find(key of slot %d) = %d, want %d", set, i, got, want)
			}
		}
		if k := key(slotsPerBucket); b.find(tag, &k) != -1 {
			t.Fatalf("slots %08b with the tag: found a key no slot holds", set)
		}
	}
}

// laneBits must be exact for every combination of lane flags.
func TestLaneBits(t *testing.T) {
	for m := range uint32(16) {
		var x uint64
		for l := range 4 {
			if m>>l&1 != 0 {
				x |= 1 << (16*l + 15)
			}
		}
		if got := laneBits(x); got != m {
			t.Errorf("laneBits(%#x) = %04b, want %04b", x, got, m)
		}
	}
}

// TestKeyEqual holds equal to ==, on keys that differ in one field each.
func TestKeyEqual(t *testing.T) {
	base := Key{SrcPort: 1000, DstPort: 80, VIP: 7, Proto: 6}
	copy(base.Src[:], []byte{198, 18, 0, 1})
	variants := []func(k *Key){
		func(k *Key) {},
		func(k *Key) { k.Src[0]++ },
		func(k *Key) { k.Src[15] = 1 },
		func(k *Key) { k.SrcPort++ },
		func(k *Key) { k.DstPort++ },
		func(k *Key) { k.VIP++ },
		func(k *Key) { k.Proto = 17 },
		func(k *Key) { k.IPv6 = true },
	}
	for i, change := range variants {
		k := base
		change(&k)
		if got, want := k.equal(&base), k == base; got != want {
			t.Errorf("variant %d: equal %v, == %v", i, got, want)
		}
	}
}
