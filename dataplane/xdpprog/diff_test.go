package xdpprog

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/vipd/vipd/dataplane"
	"github.com/vipd/vipd/testing/framegen"
)

// The steering rule exists twice: in this package's BPF assembly and in
// dataplane.Snapshot.Claims, whose answer the pipeline's verdicts follow
// (dataplane's FuzzProcess, and TestPolicyCorpus over its corpus, check
// that, both through checkProcess). The
// differential test is the single source of truth that the two agree: one
// corpus through the kernel (BPF_PROG_TEST_RUN) and through Claims, every
// frame must get the same answer.

// diffSpec is a box with every kind of VIP the rule tells apart: both
// families, NAT and DSR, TCP and UDP, an every-port VIP, two VIPs sharing
// an address (fragments are ambiguous there), NAT backends whose replies
// come from a fixed port and from any port, and local addresses on both
// ports plus one elsewhere on the box. The addresses are those of the
// dataplane's own tests, so its fuzz seeds hit the same cases here.
func diffSpec() *dataplane.Spec {
	a := netip.MustParseAddr
	be := func(prefix string, first uint32, port uint16) []dataplane.BackendSpec {
		var bs []dataplane.BackendSpec
		for i := uint32(0); i < 3; i++ {
			bs = append(bs, dataplane.BackendSpec{Ref: first + i, Addr: a(fmt.Sprintf("%s%d", prefix, i+1)), Port: port,
				Weight: 1, MAC: [6]byte{2, 0, 0, 0, 1, byte(first + i)}})
		}
		return bs
	}
	return &dataplane.Spec{
		Seed:     12345,
		TwoArmed: true,
		Host: dataplane.Host{
			MAC:            [2][6]byte{{2, 0, 0, 0, 0, 0x10}, {2, 0, 0, 0, 0, 0x11}},
			Addr4:          [2]netip.Addr{a("198.18.0.254"), a("198.18.1.1")},
			ClientGateway4: [6]byte{2, 0, 0, 0, 0, 0x20},
			ClientGateway6: [6]byte{2, 0, 0, 0, 0, 0x20},
			Addr6:          [2]netip.Addr{a("2001:2::254"), a("2001:2:1::254")},
			Local:          []netip.Addr{a("127.0.0.1"), a("198.18.9.1"), a("::1"), a("2001:2:9::1")},
		},
		// Replies go to the clients through this router.
		VIPs: []dataplane.VIPSpec{
			{ID: 1, Name: "nat4", Addr: a("198.18.0.100"), Port: 80, Proto: 6, Mode: dataplane.ModeNAT, TableSize: 251, Backends: be("198.18.1.1", 1, 8080)},
			{ID: 2, Name: "dsr4", Addr: a("198.18.0.101"), Port: 80, Proto: 6, Mode: dataplane.ModeDSR, TableSize: 251, EncapSrc: a("198.18.1.1"), Backends: be("198.18.1.2", 4, 0)},
			{ID: 3, Name: "udp4", Addr: a("198.18.0.102"), Port: 7000, Proto: 17, Mode: dataplane.ModeNAT, TableSize: 251, Backends: be("198.18.1.3", 7, 7001)},
			{ID: 4, Name: "all4", Addr: a("198.18.0.103"), Port: 0, Proto: 6, Mode: dataplane.ModeNAT, SrcHash: true, TableSize: 251, Backends: be("198.18.1.4", 10, 0)},
			{ID: 5, Name: "nat6", Addr: a("2001:2::100"), Port: 80, Proto: 6, Mode: dataplane.ModeNAT, TableSize: 251, Backends: be("2001:2:1::1", 13, 8080)},
			{ID: 6, Name: "dsr6", Addr: a("2001:2::101"), Port: 80, Proto: 6, Mode: dataplane.ModeDSR, TableSize: 251, EncapSrc: a("2001:2:1::254"), Backends: be("2001:2:1::2", 16, 0)},
			{ID: 7, Name: "web4", Addr: a("198.18.0.104"), Port: 80, Proto: 6, Mode: dataplane.ModeNAT, TableSize: 251, Backends: be("198.18.1.5", 19, 0)},
			{ID: 8, Name: "tls4", Addr: a("198.18.0.104"), Port: 443, Proto: 6, Mode: dataplane.ModeNAT, TableSize: 251, Backends: be("198.18.1.5", 22, 8443)},
			{ID: 9, Name: "dns6", Addr: a("2001:2::102"), Port: 53, Proto: 17, Mode: dataplane.ModeNAT, TableSize: 251, Backends: be("2001:2:1::3", 25, 5353)},
			{ID: 10, Name: "gue4", Addr: a("198.18.0.105"), Port: 80, Proto: 6, Mode: dataplane.ModeDSR, TableSize: 251, EncapSrc: a("198.18.1.1"),
				Encap: dataplane.EncapGUE, Backends: be("198.18.1.6", 28, 0)},
			{ID: 11, Name: "src4", Addr: a("198.18.0.106"), Port: 80, Proto: 6, Mode: dataplane.ModeDSR, TableSize: 251, EncapSrc: a("198.18.1.1"),
				EncapSrcPrefix: netip.MustParsePrefix("198.18.1.0/28"), Backends: be("198.18.1.7", 31, 0)},
		},
	}
}

// diffCorpus is every fuzz seed of the project that is a frame, and
// generated frames over diffSpec's addresses.
func diffCorpus(t testing.TB, spec *dataplane.Spec, n int) [][]byte {
	t.Helper()
	seeds, err := framegen.SeedFiles("../testdata/fuzz", "../../packet/testdata/fuzz")
	if err != nil {
		t.Fatalf("seed corpora: %v", err)
	}
	if len(seeds) == 0 {
		t.Fatalf("no fuzz seeds found")
	}
	st := spec.Steering()
	addrs := append(append(append([]netip.Addr{}, st.VIPs...), st.NextHops...), st.Local...)
	addrs = append(addrs, netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.250"),
		netip.MustParseAddr("198.18.5.1"), netip.MustParseAddr("2001:2::1"), netip.MustParseAddr("2001:2::250"),
		netip.MustParseAddr("2001:2:5::1"))
	gen, err := framegen.Generate(framegen.Params{Addrs: addrs, Ports: []uint16{0, 22, 53, 80, 443, 5353, 7000, 7001, 8080, 8443, 40000}, N: n, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return append(seeds, gen...)
}

// TestSteeringAgreesWithClaims is the differential test of the steering
// rule: at least 10,000 frames, each must be redirected by the program
// exactly when dataplane.Snapshot.Claims says the frame is vipd's. The
// program with a fast path whose flow map is empty must steer alike.
func TestSteeringAgreesWithClaims(t *testing.T) {
	t.Run("plain", func(t *testing.T) { checkSteering(t, load(t, 1)) })
	t.Run("fast path, no flows", func(t *testing.T) { checkSteering(t, loadFast(t, 16)) })
}

func checkSteering(t *testing.T, p *Program) {
	withSocket(t, p)
	spec := diffSpec()
	snap, err := dataplane.NewSnapshot(spec)
	if err != nil {
		t.Fatal(err)
	}
	st := spec.Steering()
	replies := make([]ReplyKey, len(st.Replies))
	for i, r := range st.Replies {
		replies[i] = ReplyKey{Addr: r.Addr, Proto: r.Proto, Port: r.Port}
	}
	if err := p.Update(st.VIPs, replies, st.Local); err != nil {
		t.Fatalf("Update: %v", err)
	}
	corpus := diffCorpus(t, spec, 12000)
	if len(corpus) < 10000 {
		t.Fatalf("corpus of %d frames, want at least 10000", len(corpus))
	}
	claimed, bad := 0, 0
	for i, f := range corpus {
		want := snap.Claims(f)
		if len(f) < ethHdrLen {
			// BPF_PROG_TEST_RUN refuses these (no NIC delivers them).
			if want {
				t.Errorf("frame %d of %d bytes claimed", i, len(f))
			}
			continue
		}
		got := run(t, p, f) == xdpRedirect
		if want {
			claimed++
		}
		if got != want {
			bad++
			if bad <= 10 {
				t.Errorf("frame %d: program redirects %v, Claims %v\n% x", i, got, want, f)
			}
		}
	}
	if bad > 10 {
		t.Errorf("... %d disagreements in all", bad)
	}
	// A corpus where nearly everything or nearly nothing is claimed would
	// test little.
	if claimed < len(corpus)/10 || claimed > len(corpus)*9/10 {
		t.Errorf("%d of %d frames claimed: the corpus is lopsided", claimed, len(corpus))
	}
	t.Logf("%d frames, %d claimed by both", len(corpus), claimed)
}
