// Package hashing chooses the backend for a new flow.
//
// It owns the deterministic, seeded flow hash (5-tuple or source address
// only, IPv4 and IPv6), the weighted Maglev lookup table (Eisenbud et al.,
// "Maglev: A Fast and Reliable Software Network Load Balancer", NSDI 2016)
// and, for comparison, hash-mod-N, a hash ring with virtual nodes and
// weighted rendezvous hashing, all behind one small interface.
//
// Tables are built by pure functions from the set of (backend identity,
// weight) and are immutable once built. The package knows nothing about
// packets.
package hashing
