// Package hashing chooses the backend for a new flow.
//
// It owns the deterministic, seeded flow hash (5-tuple or source address
// only, IPv4 and IPv6), the weighted Maglev lookup table (Eisenbud et al.,
// "Maglev: A Fast and Reliable Software Network Load Balancer", NSDI 2016)
// and, for comparison, hash-mod-N, a hash ring with virtual nodes and
// weighted rendezvous hashing, all behind one small interface.
//
// # Flow hashes
//
// Flow4 and Flow6 hash the 5-tuple, Src4 and Src6 the source address alone
// (client affinity), Frag4 and Frag6 the 3-tuple (IP fragments, which carry
// no ports). They are pure functions of the tuple and a seed (the configured
// flow_hash_seed; its default is config.DefaultFlowHashSeed), identical in every process on every architecture, so
// every vipd instance behind the same ECMP group sends a flow to the same
// backend. testdata/golden.txt pins their values; changing it changes where
// flows go.
//
// # Tables
//
// A Table maps a flow hash to an index into the []Backend slice it was built
// from, or -1 when that slice is empty. Tables are built by pure functions
// from the set of (ID, Weight): the order of the slice does not matter, the
// same set always gives the same table, and a change of the set is "build a
// new table, publish it". A built table is immutable and safe for concurrent
// use; Lookup does not allocate.
//
// Maglev is the dataplane's table: near-perfect balance, weights, small
// disruption when the set changes, and a lookup of one multiply and one
// index. ModN, Ring and Rendezvous exist to be measured against it; see
// bench/cmd/hashreport for the numbers.
//
// The package knows nothing about packets.
package hashing
