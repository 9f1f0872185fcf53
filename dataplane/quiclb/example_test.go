package quiclb_test

import (
	"fmt"

	"github.com/vipd/vipd/dataplane/quiclb"
)

// A server issues CIDs with a Generator; the load balancer's workers route
// them with a shared Decoder and a Scratch each.
func Example() {
	cfg := quiclb.Config{
		Rotation:    2,
		ServerIDLen: 2,
		NonceLen:    6,
		Key:         []byte("sixteen-byte-key"),
	}
	gen, err := quiclb.NewGenerator(cfg, []byte{0x01, 0x07})
	if err != nil {
		panic(err)
	}
	cid, err := gen.GenerateConnectionID()
	if err != nil {
		panic(err)
	}

	codec, err := quiclb.NewCodec(cfg)
	if err != nil {
		panic(err)
	}
	dec, err := quiclb.NewDecoder(codec)
	if err != nil {
		panic(err)
	}
	var s quiclb.Scratch
	sid := make([]byte, quiclb.MaxServerIDLen)

	shortHeader := append([]byte{0x41}, cid...)
	rot, n, v := dec.Route(shortHeader, sid, &s)
	fmt.Println(codec, "|", v, rot, sid[:n])

	clientInitial := []byte{0xc0, 0, 0, 0, 1, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0}
	_, _, v = dec.Route(clientInitial, sid, &s)
	fmt.Println(v)
	// Output:
	// rotation 2: server ID 2, nonce 6, three-pass | routable 2 [1 7]
	// client-chosen
}
