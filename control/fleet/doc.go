// Package fleet is a box's side of the fleet: the configuration every box
// of a tier shares (flow_hash_seed, every [[vip]]) and the fleet's
// run-time overrides, read from etcd under one prefix, and the last good
// copy of them kept on disk so that a box serves on when etcd is away.
// The keys, the rules and the commands: docs/fleet.md.
//
// The watcher (watch.go) keeps a box on the latest revision through a
// Store (etcd's client in vipd, a fake in tests): read and apply, watch
// from the next revision, one apply per revision, read again after a
// compaction or a failed watch; a refused revision leaves the last good
// one. Besides it are the keys (keys.go: which keys are read, how a watch's
// events become one snapshot per revision, never part of a transaction,
// and the override values), the boxes' status and fleet status's verdict
// (status.go: who lags, which VIPs' tables differ), the cache (cache.go:
// one applied revision, written atomically and durably, read back whole
// or refused with an error that says what is wrong; never half read),
// Compose and Composer (compose.go: a box's file and one revision of the
// keys into the configuration it runs), Begin (begin.go: what a box
// starts with, etcd or the cache), the etcd side (etcd.go, boxkey.go,
// ops.go, client.go) and the config key's compression (compress.go).
package fleet
