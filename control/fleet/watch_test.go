package fleet

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/vipd/vipd/testing/testkit"
)

// fakeStore plays scripted reads and watches: each Get takes the next
// read, each Watch the next list of batches (then stays open until ctx
// is done, as a live watch does).
type fakeStore struct {
	mu      sync.Mutex
	reads   []fakeRead
	watches [][]Batch
	from    []int64 // the revision each Watch was asked to start at
}

type fakeRead struct {
	rev int64
	kvs []KV
	err error
}

func (f *fakeStore) Get(context.Context) (int64, []KV, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reads) == 0 {
		return 0, nil, errors.New("no more reads scripted")
	}
	r := f.reads[0]
	f.reads = f.reads[1:]
	return r.rev, r.kvs, r.err
}

func (f *fakeStore) Watch(ctx context.Context, rev int64) <-chan Batch {
	f.mu.Lock()
	var bs []Batch
	if len(f.watches) > 0 {
		bs, f.watches = f.watches[0], f.watches[1:]
	}
	f.from = append(f.from, rev)
	f.mu.Unlock()
	ch := make(chan Batch)
	go func() {
		defer close(ch)
		for _, b := range bs {
			select {
			case ch <- b:
			case <-ctx.Done():
				return
			}
		}
		if len(bs) > 0 && (bs[len(bs)-1].Compacted || bs[len(bs)-1].Err != nil) {
			return
		}
		<-ctx.Done()
	}()
	return ch
}

func (f *fakeStore) watchedFrom() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int64(nil), f.from...)
}

// TestWatcher: the keys are read and applied once, each later revision
// is applied whole, a refused revision leaves the last good one, a
// compaction or a failed watch makes it read again from the current
// revision, and etcd errors show until etcd answers again.
func TestWatcher(t *testing.T) {
	store := &fakeStore{
		reads: []fakeRead{
			{rev: 5, kvs: []KV{{"config", []byte("v1")}, {"boxes/box2", []byte("{}")}}},
			{rev: 12, kvs: []KV{{"config", []byte("v3")}}},
			{err: errors.New("etcdserver: no leader")},
			{rev: 12, kvs: []KV{{"config", []byte("v3")}}},
		},
		watches: [][]Batch{
			{
				{Revision: 6, Events: []Event{put(6, "config", "v2"), put(6, "overrides/web/198.18.1.11:8080", `{"drain":true}`)}},
				{Revision: 7, Events: []Event{put(7, "config", "bad")}},
				{Revision: 9}, // progress
				{Compacted: true},
			},
			{{Err: errors.New("etcdserver: no leader")}},
		},
	}
	var mu sync.Mutex
	var applied []string
	w := &Watcher{Store: store, Retry: 10 * time.Millisecond, Apply: func(k *Keys) error {
		mu.Lock()
		defer mu.Unlock()
		if string(k.Config) == "bad" {
			return errors.New("vip web: no backends")
		}
		applied = append(applied, string(k.Config)+"@"+strconv.FormatInt(k.Revision, 10)+"+"+strconv.Itoa(len(k.Overrides)))
		return nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	if !testkit.Poll(5*time.Second, func() bool {
		st := w.State()
		return st.Revision == 12 && st.Connected && st.EtcdError == "" && len(store.watchedFrom()) >= 3
	}) {
		t.Fatalf("state %+v, watched from %v", w.State(), store.watchedFrom())
	}
	mu.Lock()
	got := append([]string(nil), applied...)
	mu.Unlock()
	want := []string{"v1@5+0", "v2@6+1", "v3@12+0"}
	if len(got) != len(want) {
		t.Fatalf("applied %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("applied %v, want %v", got, want)
			break
		}
	}
	st := w.State()
	if st.Errors != 1 {
		t.Errorf("%d refused revisions, want 1 (revision 7)", st.Errors)
	}
	if st.Refused != 0 {
		t.Errorf("refused %d still reported after revision 12 applied", st.Refused)
	}
	if from := store.watchedFrom(); from[0] != 6 || from[1] != 13 || from[2] != 13 {
		t.Errorf("watched from %v, want 6, then 13 after the relist, and 13 again after the failed watch", from)
	}
}

// TestWatcherRefusal: a refused revision is reported with why, and the
// last good one stays applied.
func TestWatcherRefusal(t *testing.T) {
	store := &fakeStore{
		reads:   []fakeRead{{rev: 5, kvs: []KV{{"config", []byte("v1")}}}},
		watches: [][]Batch{{{Revision: 7, Events: []Event{put(7, "config", "bad")}}}},
	}
	w := &Watcher{Store: store, Apply: func(k *Keys) error {
		if string(k.Config) == "bad" {
			return errors.New("flow_hash_seed changed: restart vipd to apply it")
		}
		return nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if !testkit.Poll(5*time.Second, func() bool { return w.State().Refused == 7 }) {
		t.Fatalf("state %+v", w.State())
	}
	if st := w.State(); st.Revision != 5 || st.Why != "flow_hash_seed changed: restart vipd to apply it" {
		t.Errorf("state %+v: want revision 5 kept and the refusal's reason", st)
	}
}
