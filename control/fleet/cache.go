package fleet

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/vipd/vipd/internal/durable"
)

// Snapshot is one revision of a fleet's keys as a box applied it: what
// the cache file holds.
type Snapshot struct {
	// Prefix is the fleet's key prefix ([fleet] prefix).
	Prefix string `json:"prefix"`
	// Revision is etcd's revision the snapshot was read at.
	Revision int64 `json:"revision"`
	// Config is the shared configuration (the config key's value).
	Config string `json:"config"`
	// Overrides are the override keys' values, by the key below
	// "overrides/" ("VIP/BACKEND").
	Overrides map[string]string `json:"overrides,omitempty"`
	// Saved is when the box wrote the cache.
	Saved time.Time `json:"saved"`
}

// cacheMagic is the cache file's first line; the second is "sha256 "
// and the hex digest of the rest, the snapshot as JSON.
const cacheMagic = "vipd fleet cache 1"

// ErrNoCache is Load's error when there is no cache file.
var ErrNoCache = errors.New("no fleet cache")

// Encode returns s as the cache file holds it.
func (s *Snapshot) Encode() ([]byte, error) {
	body, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\nsha256 %s\n", cacheMagic, hex.EncodeToString(sum[:]))
	b.Write(body)
	return b.Bytes(), nil
}

// Save writes s to path, replacing it atomically and durably, readable by
// its owner alone (the configuration may name key files and hosts an
// unprivileged user need not see).
func Save(path string, s *Snapshot) error {
	b, err := s.Encode()
	if err != nil {
		return err
	}
	return SaveBytes(path, b)
}

// SaveBytes writes an encoded snapshot (Encode) as Save does.
func SaveBytes(path string, b []byte) error {
	return durable.WriteFile(path, b, 0o600)
}

// SnapshotOf is the snapshot of the keys k of the fleet under prefix,
// saved at now.
func SnapshotOf(prefix string, k *Keys, now time.Time) *Snapshot {
	s := &Snapshot{Prefix: prefix, Revision: k.Revision, Config: string(k.Config), Saved: now}
	if len(k.Overrides) > 0 {
		s.Overrides = make(map[string]string, len(k.Overrides))
		for name, v := range k.Overrides {
			s.Overrides[name] = string(v)
		}
	}
	return s
}

// Keys returns the keys the snapshot holds.
func (s *Snapshot) Keys() *Keys {
	k := &Keys{Revision: s.Revision, Config: []byte(s.Config)}
	if len(s.Overrides) > 0 {
		k.Overrides = make(map[string][]byte, len(s.Overrides))
		for name, v := range s.Overrides {
			k.Overrides[name] = []byte(v)
		}
	}
	return k
}

// Load reads the cache at path, written for the fleet under prefix. It
// fails with ErrNoCache (wrapped) when there is none, and with an error
// naming the file and what is wrong with it when it is not a cache, is
// torn or edited (its digest does not match), or belongs to another
// prefix.
func Load(path, prefix string) (*Snapshot, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", path, ErrNoCache)
	}
	if err != nil {
		return nil, err
	}
	s, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if s.Prefix != prefix {
		return nil, fmt.Errorf("%s: the cache of the fleet under %q, not %q ([fleet] prefix changed since it was written? delete it to start from etcd)", path, s.Prefix, prefix)
	}
	return s, nil
}

// Decode parses a cache file's content, checking its digest.
func Decode(b []byte) (*Snapshot, error) {
	r := bufio.NewReader(bytes.NewReader(b))
	magic, err := r.ReadString('\n')
	if strings.TrimSuffix(magic, "\n") != cacheMagic || err != nil {
		return nil, fmt.Errorf("not a vipd fleet cache (its first line is %q, want %q)", strings.TrimSuffix(magic, "\n"), cacheMagic)
	}
	line, err := r.ReadString('\n')
	want, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "sha256 ")
	if err != nil || !ok {
		return nil, errors.New("corrupt fleet cache: no sha256 line after the first")
	}
	body := b[len(magic)+len(line):]
	sum := sha256.Sum256(body)
	if got := hex.EncodeToString(sum[:]); got != want {
		return nil, fmt.Errorf("corrupt fleet cache: its content's sha256 is %s, the file says %s (a torn or edited file; delete it to start from etcd)", got, want)
	}
	var s Snapshot
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("corrupt fleet cache: %w", err)
	}
	if s.Revision <= 0 {
		return nil, fmt.Errorf("corrupt fleet cache: revision %d", s.Revision)
	}
	return &s, nil
}
