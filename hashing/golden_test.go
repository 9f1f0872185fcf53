package hashing

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.txt from the current code")

const goldenFile = "testdata/golden.txt"

// goldenValues computes every pinned value. A change to any of them changes
// where flows go: instances running different versions would disagree (flows
// break on an ECMP reshuffle), so the golden file may only change with a
// deliberate, documented break.
func goldenValues(t *testing.T) [][2]string {
	var out [][2]string
	add := func(k string, v any) { out = append(out, [2]string{k, fmt.Sprint(v)}) }
	hex64 := func(h uint64) string { return fmt.Sprintf("%#016x", h) }

	add("Flow4(198.18.0.10:40000->198.19.0.80:443/tcp, testSeed)", hex64(Flow4(client4, vip4, 40000, 443, protoTCP, testSeed)))
	add("Flow4(198.18.0.10:40000->198.19.0.80:443/tcp, 0)", hex64(Flow4(client4, vip4, 40000, 443, protoTCP, 0)))
	add("Flow4(0.0.0.0:0->0.0.0.0:0/0, 0)", hex64(Flow4(0, 0, 0, 0, 0, 0)))
	add("Flow6([2001:db8::a]:40000->[2001:db8:0:1::50]:443/udp, testSeed)", hex64(Flow6(&client6, &vip6, 40000, 443, protoUDP, testSeed)))
	add("Src4(198.18.0.10, testSeed)", hex64(Src4(client4, testSeed)))
	add("Src6(2001:db8::a, testSeed)", hex64(Src6(&client6, testSeed)))
	add("Frag4(198.18.0.10->198.19.0.80/udp, testSeed)", hex64(Frag4(client4, vip4, protoUDP, testSeed)))
	add("Frag6(2001:db8::a->2001:db8:0:1::50/udp, testSeed)", hex64(Frag6(&client6, &vip6, protoUDP, testSeed)))

	// A table small enough to read: slot → caller index.
	small, err := NewMaglev(weightedBackends(1, 1, 2), 13)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, e := range small.entries {
		fmt.Fprintf(&sb, "%d", int(e)-1)
	}
	add("NewMaglev(weights 1,1,2; M=13) slots", sb.String())

	// Whole tables: sha256 over the owner ID of every slot, one per line.
	for _, tc := range []struct {
		name string
		bs   []Backend
	}{
		{"100 equal", equalBackends(100)},
		{"1000 equal", equalBackends(1000)},
		{"weights 1..10", weightedBackends(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)},
	} {
		tab, err := NewMaglev(tc.bs, DefaultMaglevSize)
		if err != nil {
			t.Fatal(err)
		}
		add("NewMaglev("+tc.name+"; M=65537) sha256", digest(slotIDs(tab, tc.bs)))
	}
	// The comparison algorithms: sha256 over the IDs chosen for fixed hashes.
	bs := weightedBackends(1, 2, 3, 1, 2, 3, 1, 2, 3, 4)
	hashes := randomHashes(4096, 11)
	for _, alg := range algorithms {
		add(alg.name+"(weights 1,2,3,1,2,3,1,2,3,4) lookups sha256", digest(lookupIDs(t, buildWith(t, alg.name, bs), bs, hashes)))
		add(alg.name+"(40 equal) lookups sha256", digest(lookupIDs(t, buildWith(t, alg.name, equalBackends(40)), equalBackends(40), hashes)))
	}
	return out
}

func digest(ids []string) string {
	h := sha256.New()
	for _, id := range ids {
		h.Write([]byte(id))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestGolden pins flow hashes and table contents to values computed once and
// stored in testdata: any process, on any machine or architecture, must
// compute the same (the values were also checked under GOARCH=386).
func TestGolden(t *testing.T) {
	got := goldenValues(t)
	if *update {
		var sb strings.Builder
		sb.WriteString("# Pinned by TestGolden. Regenerate only for a deliberate change of flow\n")
		sb.WriteString("# placement: go test ./hashing -run TestGolden -update\n")
		for _, kv := range got {
			fmt.Fprintf(&sb, "%s = %s\n", kv[0], kv[1])
		}
		if err := os.WriteFile(goldenFile, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := readGolden(t)
	for _, kv := range got {
		w, ok := want[kv[0]]
		switch {
		case !ok:
			t.Errorf("%s: not in %s (run with -update to add it)", kv[0], goldenFile)
		case w != kv[1]:
			t.Errorf("%s = %s, golden %s", kv[0], kv[1], w)
		}
		delete(want, kv[0])
	}
	for k := range want {
		t.Errorf("%s: in %s but no longer computed", k, goldenFile)
	}
}

func readGolden(t *testing.T) map[string]string {
	f, err := os.Open(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, " = ")
		if !ok {
			t.Fatalf("%s: malformed line %q", goldenFile, line)
		}
		m[k] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}
