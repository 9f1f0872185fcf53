package bgp

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/vipd/vipd/control/config"
)

// Config is what the speaker needs of [bgp], with the router ID resolved.
type Config struct {
	ASN      uint32
	RouterID netip.Addr // IPv4
	// HoldTime and Keepalive are proposed to every peer; RestartTime is
	// the graceful restart time, 0 for none. Whole seconds.
	HoldTime, Keepalive, RestartTime time.Duration
	// ListenPort is where passive peers connect; 0: vipd does not listen.
	ListenPort uint16
	Peers      []config.Peer
	// OnSession, when set, is told of each session that comes up
	// (established) or goes down from established, with GoBGP's reason.
	OnSession func(peer string, up bool, reason string)
}

// ConfigFrom builds the speaker's Config from [bgp]; routerID is used
// when the file sets none.
func ConfigFrom(b *config.BGP, routerID netip.Addr) Config {
	c := Config{
		ASN: b.ASN, RouterID: b.RouterID,
		HoldTime: b.HoldTime.D(), Keepalive: b.Keepalive.D(), RestartTime: b.GracefulRestart.D(),
		Peers: b.Peers,
	}
	if !c.RouterID.IsValid() {
		c.RouterID = routerID
	}
	for _, p := range b.Peers {
		if p.Passive {
			c.ListenPort = b.ListenPort
		}
	}
	return c
}

// Route is one announcement: a VIP's host route and its attributes.
type Route struct {
	Prefix netip.Prefix // /32 or /128
	// NextHop of the route; the zero Addr (or an unspecified one) lets
	// GoBGP put the session's local address. IPv6 routes to a peer over
	// IPv4 need an IPv6 one.
	NextHop     netip.Addr
	Communities []uint32
	MED         uint32
}

func (r Route) equal(o Route) bool {
	return r.Prefix == o.Prefix && r.NextHop == o.NextHop && r.MED == o.MED && slices.Equal(r.Communities, o.Communities)
}

// Speaker announces routes to the configured peers.
type Speaker struct {
	cfg Config
	log *slog.Logger
	srv *server.BgpServer

	mu sync.Mutex
	// want is the set the caller asked for (Set).
	// +checklocks:mu
	want map[netip.Prefix]Route
	// +checklocks:mu
	peers map[netip.Addr]*peerInfo
	// +checklocks:mu
	stopped bool

	// held is what GoBGP's table holds; only the reconcile goroutine
	// touches it.
	held map[netip.Prefix]Route
	// peersAdded: the peers have been handed to GoBGP, which the
	// reconcile goroutine does after the first Set (only it touches it).
	peersAdded bool
	// announced mirrors held for readers.
	announced atomic.Pointer[map[netip.Prefix]Route]

	kick chan struct{}
	done chan struct{}
	stop context.CancelFunc

	announcements, withdrawals, errors atomic.Uint64
}

type peerInfo struct {
	state       bgppkt.FSMState
	since       time.Time
	transitions map[string]uint64 // by new state
	lastError   string
	// notifications counts the NOTIFICATIONs sent to and received from
	// the peer: each one ends a session or refuses one.
	notifications uint64
}

// New returns a speaker for cfg; Start starts it.
func New(cfg Config, log *slog.Logger) *Speaker {
	if log == nil {
		log = slog.Default()
	}
	s := &Speaker{
		cfg: cfg, log: log.With("component", "bgp"),
		want: map[netip.Prefix]Route{}, held: map[netip.Prefix]Route{}, peers: map[netip.Addr]*peerInfo{},
		kick: make(chan struct{}, 1), done: make(chan struct{}),
	}
	for _, p := range cfg.Peers {
		s.peers[p.Address] = &peerInfo{since: time.Now(), transitions: map[string]uint64{}}
	}
	empty := map[netip.Prefix]Route{}
	s.announced.Store(&empty)
	return s
}

// Start starts GoBGP; the peers are added once the first Set has put its
// routes in GoBGP's table. A session that came up before would send the
// router an empty table and End-of-RIB: after a graceful restart the
// router then drops the routes it kept for vipd, the very gap graceful
// restart is there to close. Start fails only when GoBGP cannot start (a
// router ID it refuses, a listen port taken); a peer that GoBGP cannot
// add is logged and shows as idle.
func (s *Speaker) Start(ctx context.Context) error {
	if !s.cfg.RouterID.Is4() {
		return fmt.Errorf("bgp: no router ID: set [bgp] router_id, or give the egress interface an IPv4 address")
	}
	// GoBGP logs every retry of an unreachable peer, and every UPDATE at
	// debug; vipd logs the session transitions and its routes itself, and
	// gobgpLog passes on only GoBGP's warnings, errors and NOTIFICATIONs.
	lvl := &slog.LevelVar{}
	lvl.Set(slog.LevelInfo)
	glog := slog.New(gobgpLog{next: s.log.Handler(), notify: s.notification}).With("component", "gobgp")
	s.srv = server.NewBgpServer(server.LoggerOption(glog, lvl))
	go s.srv.Serve()
	port := int32(-1) // GoBGP: do not listen
	if s.cfg.ListenPort != 0 {
		port = int32(s.cfg.ListenPort)
	}
	g := &api.Global{Asn: s.cfg.ASN, RouterId: s.cfg.RouterID.String(), ListenPort: port}
	if s.cfg.RestartTime > 0 {
		g.GracefulRestart = &api.GracefulRestart{Enabled: true, RestartTime: uint32(s.cfg.RestartTime / time.Second)}
	}
	if err := s.srv.StartBgp(ctx, &api.StartBgpRequest{Global: g}); err != nil {
		s.srv.Stop()
		s.srv = nil // Stop has nothing left to stop
		return fmt.Errorf("bgp: %w", err)
	}
	// vipd only announces: whatever the routers send is rejected, so it
	// costs no memory and is never mistaken for a route of vipd's. (A
	// default action of reject would reject vipd's own paths too: the
	// global import policy also applies to them.)
	if err := s.rejectReceived(ctx); err != nil {
		s.log.Warn("could not set the import policy that rejects the routers' routes", "err", err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	if err := s.srv.WatchEvent(wctx, server.WatchEventMessageCallbacks{
		OnPeerUpdate: func(ev *apiutil.WatchEventMessage_PeerEvent, _ time.Time) {
			if ev.Type == apiutil.PEER_EVENT_STATE {
				s.peerState(ev.Peer)
			}
		},
	}, server.WatchPeer()); err != nil {
		s.log.Warn("could not watch peer sessions", "err", err)
	}
	go s.reconcile(wctx)
	return nil
}

// addPeers hands the configured peers to GoBGP.
func (s *Speaker) addPeers(ctx context.Context) {
	for _, p := range s.cfg.Peers {
		if err := s.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: s.apiPeer(p)}); err != nil {
			s.errors.Add(1)
			s.log.Error("BGP peer not added", "peer", p.Address, "err", err)
			s.mu.Lock()
			s.peers[p.Address].lastError = err.Error()
			s.mu.Unlock()
			continue
		}
		s.log.Info("BGP peer added", "peer", p.Address, "peer_asn", p.ASN, "passive", p.Passive, "families", p.Families)
	}
}

// rejectReceived installs the global import policy: routes learned from
// peers (internal or external) are rejected, local ones accepted.
func (s *Speaker) rejectReceived(ctx context.Context) error {
	reject := func(name string, rt api.Conditions_RouteType) *api.Statement {
		return &api.Statement{Name: name, Conditions: &api.Conditions{RouteType: rt},
			Actions: &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT}}
	}
	pol := &api.Policy{Name: "vipd-announce-only", Statements: []*api.Statement{
		reject("vipd-reject-external", api.Conditions_ROUTE_TYPE_EXTERNAL),
		reject("vipd-reject-internal", api.Conditions_ROUTE_TYPE_INTERNAL),
	}}
	if err := s.srv.AddPolicy(ctx, &api.AddPolicyRequest{Policy: pol, ReferExistingStatements: false}); err != nil {
		return err
	}
	return s.srv.SetPolicyAssignment(ctx, &api.SetPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
		Name: "global", Direction: api.PolicyDirection_POLICY_DIRECTION_IMPORT,
		Policies: []*api.Policy{{Name: pol.Name}}, DefaultAction: api.RouteAction_ROUTE_ACTION_ACCEPT,
	}})
}

// apiPeer is GoBGP's configuration of peer p.
func (s *Speaker) apiPeer(p config.Peer) *api.Peer {
	ap := &api.Peer{
		Conf:      &api.PeerConf{NeighborAddress: p.Address.String(), PeerAsn: p.ASN, AuthPassword: p.Password},
		Transport: &api.Transport{PassiveMode: p.Passive, RemotePort: uint32(p.Port)},
		Timers: &api.Timers{Config: &api.TimersConfig{
			HoldTime: uint64(s.cfg.HoldTime / time.Second), KeepaliveInterval: uint64(s.cfg.Keepalive / time.Second),
			// A peer that is down is retried every few seconds: a router
			// that comes back is announced to soon.
			ConnectRetry: 5,
		}},
	}
	if p.MultihopTTL > 0 {
		ap.EbgpMultihop = &api.EbgpMultihop{Enabled: true, MultihopTtl: uint32(p.MultihopTTL)}
	}
	gr := s.cfg.RestartTime > 0
	if gr {
		// LocalRestarting: the OPEN carries the restart bit and, for
		// each family, "forwarding state preserved" (RFC 4724 3). Without
		// the latter a router that kept vipd's routes through a restart
		// must drop them the moment the new session comes up (RFC 4724
		// 4.2), before the new session's routes arrive: a gap of
		// milliseconds in which the router has no route to the VIPs
		// (e2e TestBGPRestartUnresolved). It is true: the peers are added
		// only once the workers run (Start), so when the session comes up
		// the box forwards, by the same tables as before the restart.
		ap.GracefulRestart = &api.GracefulRestart{Enabled: true, RestartTime: uint32(s.cfg.RestartTime / time.Second), LocalRestarting: true}
	}
	for _, f := range p.Families {
		fam := &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
		if f == config.FamilyIPv6 {
			fam.Afi = api.Family_AFI_IP6
		}
		as := &api.AfiSafi{Config: &api.AfiSafiConfig{Family: fam, Enabled: true}}
		if gr {
			as.MpGracefulRestart = &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}}
		}
		ap.AfiSafis = append(ap.AfiSafis, as)
	}
	return ap
}

// peerState records and logs a session transition.
func (s *Speaker) peerState(p apiutil.Peer) {
	addr := p.Conf.NeighborAddress
	st := p.State.SessionState
	s.mu.Lock()
	defer s.mu.Unlock()
	pi := s.peers[addr]
	if pi == nil || pi.state == st && pi.transitions[stateName(st)] > 0 {
		return
	}
	old := pi.state
	pi.state, pi.since = st, time.Now()
	pi.transitions[stateName(st)]++
	args := []any{"peer", addr, "from", stateName(old), "to", stateName(st)}
	// GoBGP gives the reason of every transition ("open-msg-negotiated"
	// too); it is an error only on the way down the FSM (a session that
	// dropped, an OPEN refused, a NOTIFICATION).
	reason := p.State.DisconnectMessage
	if reason == "" && p.State.DisconnectReason != 0 {
		reason = p.State.DisconnectReason.String()
	}
	if reason != "" {
		args = append(args, "reason", reason)
		if st < old {
			pi.lastError = reason
		}
	}
	switch {
	case st == bgppkt.BGP_FSM_ESTABLISHED:
		s.log.Info("BGP session established", args...)
		s.checkFamilies(addr, p.State.RemoteCap)
		if s.cfg.OnSession != nil {
			s.cfg.OnSession(addr.String(), true, reason)
		}
	case old == bgppkt.BGP_FSM_ESTABLISHED:
		s.log.Warn("BGP session down", args...)
		if s.cfg.OnSession != nil {
			s.cfg.OnSession(addr.String(), false, reason)
		}
	default:
		s.log.Info("BGP session state", args...)
	}
}

// checkFamilies warns when the router at addr did not enable, for the
// session that just came up, a family the peer's configuration lists:
// vipd cannot announce that family's VIPs to it, and with graceful
// restart GoBGP sends the End-of-RIB (and any route) of every configured
// family after a restart, negotiated or not, which some routers (GoBGP
// among them) answer by resetting the session. caps are the router's
// OPEN capabilities; one without multiprotocol capabilities enables IPv4
// unicast alone (RFC 4760 8).
func (s *Speaker) checkFamilies(addr netip.Addr, caps []bgppkt.ParameterCapabilityInterface) {
	var peer *config.Peer
	for i := range s.cfg.Peers {
		if s.cfg.Peers[i].Address == addr {
			peer = &s.cfg.Peers[i]
		}
	}
	if peer == nil {
		return
	}
	enabled := map[config.Family]bool{}
	mp := false
	for _, c := range caps {
		if m, ok := c.(*bgppkt.CapMultiProtocol); ok {
			mp = true
			switch m.CapValue {
			case bgppkt.RF_IPv4_UC:
				enabled[config.FamilyIPv4] = true
			case bgppkt.RF_IPv6_UC:
				enabled[config.FamilyIPv6] = true
			}
		}
	}
	if !mp {
		enabled[config.FamilyIPv4] = true
	}
	var missing, both []config.Family
	for _, f := range peer.Families {
		if enabled[f] {
			both = append(both, f)
		} else {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		s.log.Warn("the router did not enable every family of the peer's configuration: vipd announces none of those routes to it, and with graceful_restart some routers reset the session after each vipd restart; set the peer's families to what the router enables",
			"peer", addr, "not_enabled", missing, "families", both)
	}
}

// notification records a NOTIFICATION GoBGP sent to or received from
// peer (from its log, see gobgpLog).
func (s *Speaker) notification(peer string, sent bool, code, subcode int) {
	addr, err := netip.ParseAddr(peer)
	if err != nil {
		return
	}
	dir := "received from the peer"
	if sent {
		dir = "sent to the peer"
	}
	text := notificationText(code, subcode)
	s.mu.Lock()
	if pi := s.peers[addr]; pi != nil {
		pi.notifications++
		if !(code == 6 && s.stopped) { // vipd's own CEASE as it stops is no error
			pi.lastError = "NOTIFICATION " + dir + ": " + text
		}
	}
	s.mu.Unlock()
	s.log.Warn("BGP NOTIFICATION", "peer", addr, "direction", dir, "error", text)
}

// Set makes routes the complete set the speaker announces; it returns at
// once, and the announcements and withdrawals follow.
func (s *Speaker) Set(routes []Route) {
	want := make(map[netip.Prefix]Route, len(routes))
	for _, r := range routes {
		want[r.Prefix] = r
	}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.want = want
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default: // a pass is pending; it reads the newest want
	}
}

// reconcile makes GoBGP's table match want whenever Set is called, until
// ctx is done.
func (s *Speaker) reconcile(ctx context.Context) {
	defer close(s.done)
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		case <-retry.C:
		}
		ok := s.sync()
		if !s.peersAdded {
			// After the first pass, whatever its outcome: a table GoBGP
			// half refused is still better than no session.
			s.peersAdded = true
			s.addPeers(ctx)
		}
		if !ok {
			retry.Reset(time.Second)
		}
	}
}

// sync applies the difference between want and held; false if a change
// failed (it is tried again).
func (s *Speaker) sync() bool {
	s.mu.Lock()
	want := maps.Clone(s.want)
	s.mu.Unlock()
	ok := true
	for p, r := range s.held {
		if _, keep := want[p]; keep {
			continue
		}
		if err := s.srv.DeletePath(apiutil.DeletePathRequest{Paths: []*apiutil.Path{r.path(true)}}); err != nil {
			ok = false
			s.errors.Add(1)
			s.log.Error("BGP withdrawal failed", "prefix", p, "err", err)
			continue
		}
		delete(s.held, p)
		s.withdrawals.Add(1)
		s.log.Info("BGP route withdrawn", "prefix", p)
	}
	for p, r := range want {
		if h, has := s.held[p]; has && h.equal(r) {
			continue
		}
		// Announcing a prefix again replaces its attributes (an implicit
		// withdrawal of the old path).
		if _, err := s.srv.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{r.path(false)}}); err != nil {
			ok = false
			s.errors.Add(1)
			s.log.Error("BGP announcement failed", "prefix", p, "err", err)
			continue
		}
		s.held[p] = r
		s.announcements.Add(1)
		s.log.Info("BGP route announced", "prefix", p, "next_hop", r.NextHop, "med", r.MED, "communities", r.Communities)
	}
	held := maps.Clone(s.held)
	s.announced.Store(&held)
	return ok
}

// path is r as a GoBGP path.
func (r Route) path(withdraw bool) *apiutil.Path {
	nlri, _ := bgppkt.NewIPAddrPrefix(r.Prefix) // a valid prefix always converts
	fam := bgppkt.RF_IPv4_UC
	attrs := []bgppkt.PathAttributeInterface{bgppkt.NewPathAttributeOrigin(bgppkt.BGP_ORIGIN_ATTR_TYPE_IGP)}
	nh := r.NextHop
	if r.Prefix.Addr().Is6() {
		fam = bgppkt.RF_IPv6_UC
		if !nh.Is6() {
			nh = netip.IPv6Unspecified()
		}
		mp, _ := bgppkt.NewPathAttributeMpReachNLRI(fam, []bgppkt.PathNLRI{{NLRI: nlri}}, nh)
		attrs = append(attrs, mp)
	} else {
		if !nh.Is4() {
			nh = netip.IPv4Unspecified()
		}
		a, _ := bgppkt.NewPathAttributeNextHop(nh)
		attrs = append(attrs, a)
	}
	attrs = append(attrs, bgppkt.NewPathAttributeMultiExitDisc(r.MED))
	if len(r.Communities) > 0 {
		attrs = append(attrs, bgppkt.NewPathAttributeCommunities(r.Communities))
	}
	return &apiutil.Path{Family: fam, Nlri: nlri, Attrs: attrs, Withdrawal: withdraw}
}

// Announced returns the prefixes GoBGP holds for the peers now.
func (s *Speaker) Announced() map[netip.Prefix]Route { return *s.announced.Load() }

// Stop stops the speaker. graceful closes the sessions without a
// NOTIFICATION where graceful restart was negotiated, so that those
// routers keep the routes for the restart time; otherwise every session
// ends with a CEASE and the routers drop the routes at once.
func (s *Speaker) Stop(graceful bool) {
	s.mu.Lock()
	if s.stopped || s.srv == nil {
		s.stopped = true
		s.mu.Unlock()
		return
	}
	s.stopped = true
	s.mu.Unlock()
	s.stop()
	<-s.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// StopBgp ends Serve; srv.Stop would call it a second time (and log
	// that the server is not running), so it is only the fallback.
	if err := s.srv.StopBgp(ctx, &api.StopBgpRequest{AllowGracefulRestart: graceful && s.cfg.RestartTime > 0}); err != nil {
		s.log.Warn("stopping BGP", "err", err)
		s.srv.Stop()
	}
	s.log.Info("BGP speaker stopped", "graceful_restart", graceful && s.cfg.RestartTime > 0)
}

// PeerStatus is one peer's session as Peers reports it.
type PeerStatus struct {
	Address netip.Addr
	ASN     uint32
	State   string    // idle, connect, active, opensent, openconfirm, established
	Since   time.Time // of the last transition
	// Transitions counts the session's transitions by the state entered.
	Transitions map[string]uint64
	LastError   string
	// Received and Sent count BGP messages (UPDATEs included).
	Received, Sent uint64
	// Notifications counts the NOTIFICATIONs exchanged: sessions ended or
	// refused.
	Notifications uint64
}

// Peers returns every configured peer's session.
func (s *Speaker) Peers() []PeerStatus {
	msgs := map[string][2]uint64{}
	if s.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		s.srv.ListPeer(ctx, &api.ListPeerRequest{}, func(p *api.Peer) {
			if p.State != nil && p.State.Messages != nil && p.State.Messages.Received != nil && p.State.Messages.Sent != nil {
				msgs[p.State.NeighborAddress] = [2]uint64{p.State.Messages.Received.Total, p.State.Messages.Sent.Total}
			}
		})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]PeerStatus, 0, len(s.cfg.Peers))
	for _, p := range s.cfg.Peers {
		pi := s.peers[p.Address]
		m := msgs[p.Address.String()]
		out = append(out, PeerStatus{
			Address: p.Address, ASN: p.ASN, State: stateName(pi.state), Since: pi.since,
			Transitions: maps.Clone(pi.transitions), LastError: pi.lastError, Received: m[0], Sent: m[1],
			Notifications: pi.notifications,
		})
	}
	return out
}

// Stats are the speaker's counters since start.
type Stats struct {
	Announcements, Withdrawals, Errors uint64
	Announced                          int // prefixes held now
}

// Stats returns the speaker's counters.
func (s *Speaker) Stats() Stats {
	return Stats{
		Announcements: s.announcements.Load(), Withdrawals: s.withdrawals.Load(), Errors: s.errors.Load(),
		Announced: len(s.Announced()),
	}
}

// stateNames are the session states in the order of RFC 4271's FSM (and
// of admin.BGPStates, the metric's labels).
var stateNames = []string{"idle", "connect", "active", "opensent", "openconfirm", "established"}

func stateName(st bgppkt.FSMState) string {
	if int(st) >= 0 && int(st) < len(stateNames) {
		return stateNames[st]
	}
	return st.String()
}
