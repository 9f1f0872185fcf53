package admin

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vipd/vipd/control/admin/api"
)

// BGPMetrics is the raw material of the vipd_bgp_* metrics.
type BGPMetrics struct {
	Peers []BGPPeerMetrics
	// Announcements and Withdrawals count the route changes sent to
	// GoBGP; Errors those that failed.
	Announcements, Withdrawals, Errors uint64
	Prefixes                           int             // announced now
	VIPAnnounced                       map[string]bool // by VIP name, for VIPs with announce on
	BoxDraining                        bool
}

// BGPPeerMetrics is one peer in BGPMetrics.
type BGPPeerMetrics struct {
	Address     string
	State       string
	Transitions map[string]uint64 // by the state entered
	// Notifications counts the NOTIFICATIONs exchanged with the peer.
	Notifications uint64
}

var (
	dBGPPeerState   = desc("bgp_peer_state", "BGP session state of a peer: 1 for the state it is in, 0 for the others.", "peer", "state")
	dBGPPeerUp      = desc("bgp_peer_up", "1 while the BGP session with the peer is established.", "peer")
	dBGPTransitions = desc("bgp_peer_transitions_total", "BGP session transitions of a peer, by the state entered.", "peer", "state")
	dBGPNotes       = desc("bgp_peer_notifications_total", "BGP NOTIFICATIONs sent to or received from a peer: sessions ended or refused (a wrong AS, a bad hold time); the reason is in the log and vipd status.", "peer")
	dBGPAnnounce    = desc("bgp_announcements_total", "Routes announced (or re-announced with new attributes).")
	dBGPWithdraw    = desc("bgp_withdrawals_total", "Routes withdrawn.")
	dBGPErrors      = desc("bgp_errors_total", "Announcements or withdrawals the speaker failed to make (retried).")
	dBGPPrefixes    = desc("bgp_prefixes_announced", "Prefixes announced now.")
	dBGPVIP         = desc("bgp_vip_announced", "1 while the VIP's route is announced, 0 while it is withdrawn.", "vip")
	dBGPBoxDraining = desc("bgp_box_draining", "1 while the box is lame-ducked (vipd drain-box, or stopping): every VIP withdrawn.")
)

func collectBGP(m *BGPMetrics, counter func(*prometheus.Desc, uint64, ...string), gauge func(*prometheus.Desc, float64, ...string)) {
	if m == nil {
		return
	}
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	for _, p := range m.Peers {
		for _, s := range api.BGPStates {
			gauge(dBGPPeerState, b2f(p.State == s), p.Address, s)
			counter(dBGPTransitions, p.Transitions[s], p.Address, s)
		}
		gauge(dBGPPeerUp, b2f(p.State == "established"), p.Address)
		counter(dBGPNotes, p.Notifications, p.Address)
	}
	counter(dBGPAnnounce, m.Announcements)
	counter(dBGPWithdraw, m.Withdrawals)
	counter(dBGPErrors, m.Errors)
	gauge(dBGPPrefixes, float64(m.Prefixes))
	for vip, on := range m.VIPAnnounced {
		gauge(dBGPVIP, b2f(on), vip)
	}
	gauge(dBGPBoxDraining, b2f(m.BoxDraining))
}

// BoxDrainer is a Provider that can lame-duck the whole box: withdraw
// every BGP route, keep forwarding for the linger time, then report
// drained. The daemon is one when it runs with [bgp].
type BoxDrainer interface {
	// DrainBox starts the lame duck (or, with undo, ends it and announces
	// again) and returns the state it leads to.
	DrainBox(undo bool) (*api.BoxDrainAnswer, error)
}

func handleDrainBox(p Provider) http.Handler {
	return jsonOnly(func(w http.ResponseWriter, r *http.Request) {
		var req api.BoxDrainRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil && !errors.Is(err, io.EOF) {
			http.Error(w, `want {"undo": false|true}`, http.StatusBadRequest)
			return
		}
		bd, ok := p.(BoxDrainer)
		if !ok {
			http.Error(w, api.ErrNoBGP.Error(), http.StatusConflict)
			return
		}
		ans, err := bd.DrainBox(req.Undo)
		if err != nil {
			httpError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(ans)
	})
}
