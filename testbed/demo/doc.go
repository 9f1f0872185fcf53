// Command demo is `make demo`: it builds vipd, brings up the test bed
// (client, router, the vipd box and three backends in throwaway network
// namespaces), runs vipd with config.toml.example, sends real HTTP requests
// through the NAT VIP and then the DSR VIP plus a short bounded burst of
// TCP SYNs, prints what happened, and removes everything it created. It
// needs root and finishes in well under a minute.
package main
