// Package conntrack is vipd's connection table: a sharded, fixed-capacity,
// open-addressed flow table that pins every live flow to its backend so that
// changes of the backend set do not break established connections.
//
// Memory is allocated once, up front; lookups and inserts do not allocate.
// Entries expire by per-state timeouts against a coarse clock advanced once
// per batch, and expiry work is bounded per batch.
package conntrack
