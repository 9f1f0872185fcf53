package fleet

import (
	"reflect"
	"slices"
	"testing"
)

func TestAgree(t *testing.T) {
	box := func(name string, rev int64, tables map[string]string) BoxStatus {
		return BoxStatus{Box: name, Revision: rev, Tables: tables}
	}
	same := map[string]string{"web": "aaaa", "dns": "bbbb"}
	for _, tc := range []struct {
		name     string
		latest   int64
		boxes    []BoxStatus
		lagging  []string
		disagree map[string]map[string][]string
		summary  []string
	}{
		{"agree", 7, []BoxStatus{box("box1", 7, same), box("box2", 9, same)}, nil, nil, nil},
		{"one lags", 7, []BoxStatus{box("box2", 6, same), box("box1", 7, same)}, []string{"box2"}, nil,
			[]string{"not at revision 7: box2"}},
		{"tables differ", 7, []BoxStatus{box("box1", 7, same), box("box3", 7, map[string]string{"web": "cccccccccccccccc", "dns": "bbbb"})}, nil,
			map[string]map[string][]string{"web": {"aaaa": {"box1"}, "cccccccccccccccc": {"box3"}}},
			[]string{"VIP web: different tables: aaaa on box1; cccccccccccc on box3"}},
		{"no boxes", 7, nil, nil, nil, nil},
		{"same keys read at an older revision", 7, []BoxStatus{
			{Box: "box1", Revision: 5, Digest: "d1", Tables: same},
			{Box: "box2", Revision: 8, Digest: "d1", Tables: same},
			{Box: "box3", Revision: 6, Digest: "d0", Tables: same},
		}, []string{"box3"}, nil, []string{"not at revision 7: box3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := Agree(tc.latest, tc.boxes)
			if !slices.Equal(a.Lagging, tc.lagging) || !reflect.DeepEqual(a.Disagree, tc.disagree) {
				t.Errorf("lagging %v, disagree %v; want %v, %v", a.Lagging, a.Disagree, tc.lagging, tc.disagree)
			}
			if got := a.Summary(); !slices.Equal(got, tc.summary) {
				t.Errorf("summary %q, want %q", got, tc.summary)
			}
			if a.OK() != (len(tc.summary) == 0) {
				t.Errorf("OK %v with summary %q", a.OK(), a.Summary())
			}
		})
	}
}

func TestBoxStatusRoundTrip(t *testing.T) {
	s := BoxStatus{Box: "box1", Revision: 42, Digest: "ab", Seed: 7, Tables: map[string]string{"web": "cd"}, Version: "0.0+git1", Role: "active", Ready: true, Refused: 43, LastError: "seed changed: restart to apply"}
	b, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeBoxStatus(b)
	if err != nil || !reflect.DeepEqual(got, s) {
		t.Errorf("decoded %+v, %v; want %+v", got, err, s)
	}
}
