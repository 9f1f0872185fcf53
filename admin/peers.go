package admin

import (
	"fmt"
	"io"

	"github.com/vipd/vipd/admin/api"
)

// WritePeers prints st's BGP sessions as vipd status does, or "no [bgp]"
// when the daemon runs without a speaker.
func WritePeers(w io.Writer, st *api.State) {
	if st.BGP == nil {
		fmt.Fprintln(w, "no [bgp]: vipd announces nothing and has no peers")
		return
	}
	writeBGP(w, st)
}
