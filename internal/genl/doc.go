// Package genl is the little of generic netlink vipd speaks, over
// github.com/mdlayher/netlink: a family's id by its name, a request for a
// command with attributes, and the attributes of an answer. The netdev
// family's XDP features (package xdpprog) and NAPI instances (the bench
// rig) are read with it.
package genl
