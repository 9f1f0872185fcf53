package bench

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"strings"
	"testing"
)

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []float64
		want Summary
	}{
		{"odd", []float64{3, 1, 2}, Summary{Median: 2, Min: 1, Max: 3, N: 3}},
		{"even", []float64{4, 1, 2, 3}, Summary{Median: 2.5, Min: 1, Max: 4, N: 4}},
		{"nan ignored", []float64{math.NaN(), 5}, Summary{Median: 5, Min: 5, Max: 5, N: 1}},
		{"empty", nil, Summary{}},
	} {
		if got := Summarize(tc.in); got != tc.want {
			t.Errorf("%s: Summarize(%v) = %+v, want %+v", tc.name, tc.in, got, tc.want)
		}
	}
	if !math.IsNaN(Ratio(1, 0)) || Ratio(3, 2) != 1.5 {
		t.Error("Ratio")
	}
}

const goTestOutput = `goos: linux
goarch: amd64
pkg: github.com/vipd/vipd/dataplane
cpu: AMD EPYC
BenchmarkPipeline/nat/hit/flows=1/64B-2         	 7881331	        77.78 ns/op	 822.87 MB/s	        77.78 ns/pkt	  12857410 pkt/s	       0 B/op	       0 allocs/op
some log line
BenchmarkHeaderRestore/flows=1-2 	100	 5.5 ns/op
PASS
ok  	github.com/vipd/vipd/dataplane	25.096s
pkg: github.com/vipd/vipd/hashing
BenchmarkFlowHash/Flow4-2	1000	3.1 ns/op	320000000 lookups/s
`

func TestParseGoBench(t *testing.T) {
	bs, err := ParseGoBench(strings.NewReader(goTestOutput))
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 3 {
		t.Fatalf("parsed %d results, want 3: %+v", len(bs), bs)
	}
	p := bs[0]
	if p.Pkg != "github.com/vipd/vipd/dataplane" || p.Name != "Pipeline/nat/hit/flows=1/64B" || p.N != 7881331 {
		t.Errorf("first = %+v", p)
	}
	if p.Metrics["ns/pkt"] != 77.78 || p.Metrics["pkt/s"] != 12857410 || p.Metrics["allocs/op"] != 0 {
		t.Errorf("metrics = %v", p.Metrics)
	}
	if bs[2].Pkg != "github.com/vipd/vipd/hashing" || bs[2].Name != "FlowHash/Flow4" {
		t.Errorf("last = %+v", bs[2])
	}
}

func sampleReport() *Report {
	s := func(m float64) Summary { return Summary{Median: m, Min: m * 0.9, Max: m * 1.1, N: 3} }
	return &Report{
		Env: Env{Date: "2026-01-01 00:00 UTC", Kernel: "6.18", CPU: "test", CPUs: 2, GoVersion: "go1.26", Commit: "abc", Command: "make bench"},
		Rig: []RigResult{
			{Name: "ceiling", Kind: KindCeiling, Queues: 1, Forwarded: s(700e3), Offered: s(700e3)},
			{Name: NameNFT, Kind: KindKernel, Mode: "nft", Queues: 1, Forwarded: s(300e3), Offered: s(300e3)},
			{Name: "fwd 1", Kind: KindForwarder, Queues: 1, Forwarded: s(500e3), Offered: s(500e3)},
			{Name: "vipd <nat> & co", Kind: KindVIPD, Mode: "nat", IO: "afxdp", Queues: 1, Forwarded: s(400e3), Offered: s(500e3),
				SockDrops: s(100e3), CPUBusy: []float64{1, 0.9}, Extra: map[string]float64{"frames per batch": 4}},
			{Name: "broken", Kind: KindVIPD, Queues: 2, Err: "vipd did not\ncome up | really"},
		},
		InMem: []GoBench{{Pkg: "x/dataplane", Name: "Pipeline/nat/hit/flows=1/64B", Metrics: map[string]float64{"ns/pkt": 77, "pkt/s": 13e6, "allocs/op": 0}}},
	}
}

func TestMarkdown(t *testing.T) {
	var b bytes.Buffer
	sampleReport().WriteMarkdown(&b, "latest.svg")
	md := b.String()
	for _, want := range []string{
		"| vipd <nat> & co | **0.400** (0.360–0.440) | 0.500 |",
		"box: drops 20% of offered",
		"1.33×", // vs nftables
		"0.57×", // vs ceiling
		"0.80×", // vs the forwarder
		"sender CPU: offered 43% of ceiling",
		"goal ≥ 90%: **not met**",
		"failed: vipd did not come up / really",
		"![median forwarded packets per second, min–max whiskers](latest.svg)",
		"77.0 ns/packet (goal ≤ 50 ns: **not met**)",
		"| vipd <nat> & co | 2250 | 4.0 |", // CPU 1: 0.9 s / 400k packets
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestSVGIsWellFormed(t *testing.T) {
	var b bytes.Buffer
	if err := sampleReport().WriteSVG(&b, "title <&>"); err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(&b)
	rects := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "rect" {
			rects++
		}
	}
	// Background, then an offered and a forwarded bar per measured row.
	if rects != 1+2*4 {
		t.Errorf("%d rects, want 9", rects)
	}
}

func TestNiceCeil(t *testing.T) {
	for in, want := range map[float64]float64{0: 1e5, 730e3: 1e6, 1.2e6: 2e6, 2.4e6: 2.5e6} {
		if got := niceCeil(in); got != want {
			t.Errorf("niceCeil(%g) = %g, want %g", in, got, want)
		}
	}
}
