package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/admin/client"
)

// writeJSON prints v indented, as the admin API's JSON.
func writeJSON(w io.Writer, v any) int {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return 1
	}
	return 0
}

// peers prints the BGP sessions of /v1/state: a table, or with -json the
// state's bgp object (null without [bgp]).
func peers(args []string, stdout, stderr io.Writer) int {
	fs, addrFlag, cfgFlag := adminFlags("peers", stderr)
	asJSON := fs.Bool("json", false, "print the BGP part of /v1/state as JSON")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: vipd peers [-json] [-admin ADDR | -config FILE]")
		return 2
	}
	addr, err := adminAddr(*addrFlag, *cfgFlag, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "vipd peers: %v\n", err)
		return 1
	}
	st, err := client.FetchState(context.Background(), addr)
	if err != nil {
		fmt.Fprintf(stderr, "vipd peers: %v\n", err)
		return 1
	}
	if *asJSON {
		return writeJSON(stdout, st.BGP)
	}
	writePeers(stdout, st)
	return 0
}

// writePeers prints st's BGP sessions as vipd status does, or "no [bgp]"
// when the daemon runs without a speaker.
func writePeers(w io.Writer, st *api.State) {
	if st.BGP == nil {
		fmt.Fprintln(w, "no [bgp]: vipd announces nothing and has no peers")
		return
	}
	writeBGP(w, st)
}
