package fleet

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The operator's side: what vipd fleet push, pull and status, and the
// -fleet forms of drain, weight, disable and enable do to the keys.

// ErrChanged is Push's error when the configuration changed since it was
// read: someone else pushed; read it again and redo the change.
var ErrChanged = errors.New("the fleet's configuration changed since it was read")

// Pull reads the shared configuration under prefix: the document (nil if
// there is none yet) and the revision it was last changed at (0: none),
// which Push takes to write it back only if nobody changed it meanwhile.
func Pull(ctx context.Context, cli *clientv3.Client, prefix string) (doc []byte, modRev int64, err error) {
	resp, err := cli.Get(ctx, prefix+KeyConfig)
	if err != nil {
		return nil, 0, err
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, nil
	}
	doc, err = DecodeConfig(resp.Kvs[0].Value)
	return doc, resp.Kvs[0].ModRevision, err
}

// Push writes doc as the shared configuration if it was last changed at
// modRev (0: if there is none), in one compare-and-swap; it returns the
// revision written, which every box reports once it applied it.
func Push(ctx context.Context, cli *clientv3.Client, prefix string, doc []byte, modRev int64) (int64, error) {
	key := prefix + KeyConfig
	v, err := EncodeConfig(doc)
	if err != nil {
		return 0, err
	}
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", modRev)).
		Then(clientv3.OpPut(key, string(v))).
		Commit()
	if err != nil {
		return 0, err
	}
	if !resp.Succeeded {
		return 0, ErrChanged
	}
	return resp.Header.Revision, nil
}

// SetOverride writes the override of backend of VIP vip: value (drain,
// weight or disabled, with who, why and when) as overrides/VIP/BACKEND;
// a nil value deletes it, undoing it. It returns the revision written.
func SetOverride(ctx context.Context, cli *clientv3.Client, prefix, vip string, backend netip.AddrPort, value *Override) (int64, error) {
	key := prefix + KeyOverrides + vip + "/" + backend.String()
	if value == nil {
		resp, err := cli.Delete(ctx, key)
		if err != nil {
			return 0, err
		}
		return resp.Header.Revision, nil
	}
	v := overrideValue{By: value.By, Why: value.Why, At: value.At}
	switch {
	case value.Drain:
		v.Drain = &value.Drain
	case value.Disabled:
		v.Disabled = &value.Disabled
	case value.Weight != nil:
		v.Weight = value.Weight
	default:
		return 0, fmt.Errorf("override of %s %s: no drain, weight or disabled", vip, backend)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return 0, err
	}
	if _, err := ParseOverride(vip+"/"+backend.String(), b); err != nil {
		return 0, err
	}
	resp, err := cli.Put(ctx, key, string(b))
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// Boxes reads every live box's status (a box whose lease expired has no
// key), sorted by box; a value that does not parse is returned as a box
// with that error as its LastError.
func Boxes(ctx context.Context, cli *clientv3.Client, prefix string) ([]BoxStatus, error) {
	resp, err := cli.Get(ctx, prefix+KeyBoxes, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	var out []BoxStatus
	for _, kv := range resp.Kvs {
		s, err := DecodeBoxStatus(kv.Value)
		if err != nil {
			s = BoxStatus{Box: string(kv.Key[len(prefix+KeyBoxes):]), LastError: "unreadable status: " + err.Error()}
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b BoxStatus) int { return cmp.Compare(a.Box, b.Box) })
	return out, nil
}

// WaitApplied waits until every live box reports revision rev or later,
// polling every 20 ms until ctx is done; it returns the boxes that still
// do not (none: all did). When ctx ends during a poll, the answer is the
// last poll that etcd answered: the boxes behind then, not the deadline's
// error. The error is returned only when etcd answered no poll at all.
func WaitApplied(ctx context.Context, cli *clientv3.Client, prefix string, rev int64) ([]string, error) {
	var behind []string
	answered := false
	for {
		boxes, err := Boxes(ctx, cli, prefix)
		if err == nil {
			answered = true
			behind = behind[:0]
			for _, b := range boxes {
				if b.Revision < rev {
					behind = append(behind, b.Box)
				}
			}
			if len(behind) == 0 {
				return nil, nil
			}
		}
		select {
		case <-ctx.Done():
			if !answered {
				if err == nil {
					err = ctx.Err()
				}
				return nil, err
			}
			return behind, nil
		case <-time.After(20 * time.Millisecond):
		}
	}
}
