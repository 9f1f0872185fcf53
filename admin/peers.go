package admin

import (
	"fmt"
	"io"
)

// WritePeers prints st's BGP sessions as vipd status does, or "no [bgp]"
// when the daemon runs without a speaker.
func WritePeers(w io.Writer, st *State) {
	if st.BGP == nil {
		fmt.Fprintln(w, "no [bgp]: vipd announces nothing and has no peers")
		return
	}
	writeBGP(w, st)
}
