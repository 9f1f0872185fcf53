package hashing_test

import (
	"fmt"

	"github.com/vipd/vipd/hashing"
)

func ExampleNewMaglev() {
	backends := []hashing.Backend{
		{ID: "198.18.1.10:8080", Weight: 1},
		{ID: "198.18.1.11:8080", Weight: 1},
		{ID: "198.18.1.12:8080", Weight: 2},
	}
	table, err := hashing.NewMaglev(backends, hashing.DefaultMaglevSize)
	if err != nil {
		panic(err)
	}
	// 198.18.0.10:40000 -> 198.19.0.80:443, TCP. Addresses as read from the
	// packet with binary.BigEndian.Uint32.
	h := hashing.Flow4(0xc612000a, 0xc6130050, 40000, 443, 6, 0x76697064_2d666831)
	fmt.Println(backends[table.Lookup(h)].ID)

	empty, _ := hashing.NewMaglev(nil, hashing.DefaultMaglevSize)
	fmt.Println(empty.Lookup(h))
	// Output:
	// 198.18.1.12:8080
	// -1
}
