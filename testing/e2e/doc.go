// Package e2e is vipd's end-to-end suite: vipd runs as a user runs it, in a
// throwaway network of namespaces (package testbed), with real kernel
// interfaces, TCP and UDP clients and servers, in NAT and DSR mode, with the
// AF_XDP and AF_PACKET drivers. It needs root and skips otherwise.
package e2e
