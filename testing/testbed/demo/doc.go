// Command demo is `make demo`: it builds vipd, brings up the test bed
// (client, router, the vipd box and three backends in throwaway network
// namespaces), runs vipd with config.toml.example, sends real HTTP requests
// through the NAT VIP and then the DSR VIP plus a short bounded burst of
// TCP SYNs, and prints what vipd counted. Then the operator's day
// (daytoday.go): a backend's server is killed and `vipd status` says why,
// `vipd weight` changes a weight at run time, and while requests stream
// `vipd top` and `vipd conns` show the rates and the flows — each the real
// command line run in the box. Last, vipd runs again with the XDP fast
// path on for a download. It removes everything it created, needs root and
// finishes in well under a minute.
package main
