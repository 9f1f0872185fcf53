// Package fleetgen writes fleets' shared documents of any size, for the
// fleet's tests and benchmarks: N VIPs of M backends, every address in
// 198.18.0.0/15, as `vipd fleet push` would store them.
//
// Only tests import it. Nothing it describes is sent anywhere.
package fleetgen
