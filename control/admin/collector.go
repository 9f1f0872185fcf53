package admin

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/dataplane"
)

// collector turns a Provider's Metrics into Prometheus metrics at scrape
// time. Counters come from the workers' published copies, so a scrape
// never stops a worker.
type collector struct {
	p Provider
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("vipd_"+name, help, labels, nil)
}

var (
	dRxFrames    = desc("rx_frames_total", "Frames received, per worker.", "worker")
	dRxBytes     = desc("rx_bytes_total", "Bytes received, per worker.", "worker")
	dVerdicts    = desc("verdicts_total", "Frames by pipeline verdict.", "verdict")
	dDrops       = desc("drops_total", "Packets not forwarded, by reason.", "reason")
	dICMPSent    = desc("icmp_sent_total", "ICMP messages vipd sent (fragmentation needed, packet too big, echo replies).")
	dICMPLimited = desc("icmp_rate_limited_total", "ICMP messages suppressed by the per-worker rate limit.")
	dICMPSteered = desc("icmp_steered_total", "ICMP errors steered to the backend owning their flow.")
	dICMPRelay   = desc("icmp_relay_total", "ICMP errors about flows the receiving worker does not hold: handed on to the next worker (handed), received from another (received), steered by Maglev because the next inbox was full (not_relayed).", "result")
	dL4Sampled   = desc("l4_checksum_sampled_total", "Transport checksums verified on a sample of NAT'ed packets (one in 64).")
	dL4Bad       = desc("l4_checksum_bad_total", "Sampled NAT'ed packets whose transport checksum was wrong: typically a local sender with TX checksum offload on its veth (docs/operations.md, Host preparation).")
	dFastRetired = desc("fast_path_retired_total", "Client flows whose end (FIN, RST) was passed to the XDP fast path: their entries stop serving, so that a new connection on the same tuple goes through a worker.")
	dFastOffered = desc("fast_path_offered_total", "Flows handed to the XDP fast path: established client flows of NAT and DSR VIPs, NAT backends' reply flows (renewals included).")
	dFastOn      = desc("fast_path_on", "1 while the XDP fast path runs ([dataplane] fast_path on, or auto finding the interfaces able at start), else 0.")
	dFastErrors  = desc("fast_path_flush_errors_total", "Hand-overs of offered flows to the XDP fast path that failed (the flows stay with the workers).")
	dFragments   = desc("fragments_out_total", "Fragments vipd made from packets too big for the egress MTU with DF clear.")
	dReplies     = desc("nat_replies_total", "NAT replies translated back to their VIP.")
	dLookups     = desc("flow_lookups_total", "Connection-table lookups on the packet path.", "result")
	dUntracked   = desc("flows_untracked_total", "New flows the connection table had no room for (forwarded statelessly).")
	dRepicked    = desc("flows_repicked_total", "Flows moved off a backend that went down or away.")
	dReused      = desc("flows_reused_tuple_total", "New connections (SYNs) on the tuple of a flow whose backend takes no new flows (draining, weight 0, down, disabled, removed), placed as new flows.")
	dStateless   = desc("stateless_packets_total", "Packets forwarded by Maglev alone (fragments, untracked flows).")
	dBatches     = desc("worker_batches_total", "Batches processed, per worker.", "worker")
	dBatchSize   = desc("worker_batch_size", "Frames per batch, per worker.", "worker")
	dVIPPackets  = desc("vip_packets_total", "Packets from clients forwarded to a VIP's backends (ipvsadm's InPkts): the sum of its backends'.", "vip")
	dVIPBytes    = desc("vip_bytes_total", "IP bytes from clients forwarded to a VIP's backends (InBytes).", "vip")
	dVIPOutPkts  = desc("vip_out_packets_total", "A NAT VIP's replies relayed to its clients (ipvsadm's OutPkts); absent for DSR VIPs, whose replies bypass vipd.", "vip")
	dVIPOutBytes = desc("vip_out_bytes_total", "IP bytes of a NAT VIP's replies relayed to its clients (OutBytes).", "vip")
	dVIPNewFlows = desc("vip_new_flows_total", "New flows of a VIP.", "vip")
	dBePackets   = desc("backend_packets_total", "Packets sent to a backend.", "vip", "backend")
	dBeBytes     = desc("backend_bytes_total", "IP bytes sent to a backend.", "vip", "backend")
	dBeOutPkts   = desc("backend_out_packets_total", "A NAT backend's replies relayed to its clients (ipvsadm's OutPkts); absent for DSR backends, whose replies bypass vipd.", "vip", "backend")
	dBeOutBytes  = desc("backend_out_bytes_total", "IP bytes of a NAT backend's replies relayed to its clients (OutBytes).", "vip", "backend")
	dBeNewFlows  = desc("backend_new_flows_total", "Flows pinned to a backend.", "vip", "backend")
	dBeEjected   = desc("backend_ejected", "1 while passive outlier detection keeps the backend out, else 0.", "vip", "backend")
	dBeEjections = desc("backend_ejections_total", "Passive outlier ejections of a backend.", "vip", "backend")
	dBeHealthTr  = desc("backend_health_transitions_total", "Changes of a backend's health check verdict (up, down, draining), its first verdict included.", "vip", "backend")
	dBeLastChg   = desc("backend_last_change_timestamp_seconds", "When a backend's health check verdict last changed, in seconds since the epoch; absent before its first verdict.", "vip", "backend")
	dBeHandshake = desc("backend_handshakes_total", "Tracked TCP flows to a backend that began with a SYN.", "vip", "backend")
	dBeAnswered  = desc("backend_handshakes_answered_total", "Answers to them: in NAT mode the backend's SYN-ACKs relayed (retransmissions too), in DSR mode the flows whose client went on past its SYNs.", "vip", "backend")
	dBeHSTime    = desc("backend_handshake_seconds", "Time from a TCP flow's first SYN to its answer (NAT: the backend's SYN-ACK; DSR: the client's next packet), on the workers' batch clocks; present once the backend had a handshake.", "vip", "backend")
	dBeEffWeight = desc("backend_effective_weight", "A backend's weight after slow start and its reported load and error rate (its configured weight when neither applies).", "vip", "backend")
	dBeLoadBad   = desc("backend_load_reports_malformed_total", "Load reports (the health check's load_header) that were not a number from 0 to 1, ignored.", "vip", "backend")
	dBeUp        = desc("backend_forwarding", "Backend forwarding state, one series per state: 1 for the state the backend is in, 0 for the others (up: new and existing flows; draining: existing flows only; down: none).", "vip", "backend", "state")
	dCTEntries   = desc("conntrack_entries", "Flows in the connection table, timed-out ones included until the expiry scan, which goes round the table every 10 s, reaches them.")
	dCTCapacity  = desc("conntrack_capacity", "Flows the connection table can hold.")
	dCTInserts   = desc("conntrack_inserts_total", "Flows inserted into the connection table.")
	dCTExpired   = desc("conntrack_expirations_total", "Flows reclaimed after their idle timeout.")
	dCTEvictions = desc("conntrack_evictions_total", "Flows evicted to make room, by reason.", "reason")
	dCTFull      = desc("conntrack_full_total", "Inserts refused for want of room (the flow went stateless).")
	dDriver      = desc("driver_events_total", "Driver counters, summed over queues.", "event")
	dReloads     = desc("config_reloads_total", "Configuration reloads, by result.", "result")
	// Prometheus's own convention for a reloadable configuration.
	dReloadOK     = desc("config_last_reload_successful", "1 when the last load of the configuration file (the start or the last reload) applied, 0 when the last reload was refused (the previous configuration runs).")
	dReloadTime   = desc("config_last_reload_timestamp_seconds", "When the configuration last loaded (the start or the last reload that applied), in seconds since the epoch.")
	dConfigDiffer = desc("config_file_differs", "1 when the configuration file on disk is not the one that runs (edited and not reloaded, or its reload refused).")
	// The fleet's (docs/fleet.md): only on a box with [fleet].
	dFleetConnected = desc("fleet_connected", "1 while the box's watch on etcd runs and etcd answers, 0 while etcd is away (traffic is not affected).")
	dFleetStale     = desc("fleet_stale", "1 while the box cannot know it runs the fleet's latest revision (etcd away or silent, or started from its cache).")
	dFleetRevision  = desc("fleet_revision", "etcd revision of the fleet's keys the box runs.")
	dFleetAge       = desc("fleet_revision_age_seconds", "Seconds since the box last learned that the revision it runs is the fleet's latest.")
	dFleetErrors    = desc("fleet_apply_errors_total", "Revisions of the fleet the box refused (invalid here, or a change that needs a restart); it keeps the last good one.")
	dFleetCacheErr  = desc("fleet_cache_errors_total", "Failed writes of the fleet cache file.")
	dAllDown        = desc("all_backends_down_total", "Times every backend of a VIP was found down.", "vip")
	dGeneration     = desc("snapshot_generation", "Snapshots published since start.")
	dRole           = desc("neighbor_role", "1 for the box's neighbor role now (active: answers ARP/NDP for its VIPs and announces them; standby: neither), 0 for the other.", "role")
	dRoleChanges    = desc("neighbor_role_changes_total", "Switches of the neighbor role since start (vipd active, vipd standby).")
	dQUICRouted     = desc("quic_lb_routed_total", "Packets of QUIC-LB VIPs routed by the server ID in their connection ID (what=packets), those of them whose connection-table entry moved to that server from another backend (what=moved), and ICMP errors steered by the quoted packet's source connection ID (what=icmp).", "what")
	dQUICFall       = desc("quic_lb_fallback_total", "Packets of QUIC-LB VIPs (and quoted ones, in ICMP errors) that the connection ID did not route, by reason; they took the connection table and the scheduler.", "reason")
	dHints          = desc("previous_owner_hints_total", "Previous-owner hints: flows that missed the connection table mid-stream and were given one (flows), and packets sent with one (packets).", "what")
	dPrevUntil      = desc("vip_previous_owner_expiry_seconds", "When the VIP's previous backend set (previous_owner) expires, in Unix seconds; absent while it has none.", "vip")
	dStateErrors    = desc("state_file_errors_total", "Reads and writes of [dataplane] state_file that failed.")
	dStalled        = desc("workers_stalled", "Workers that started no loop iteration for 2 s or more: while above 0 every BGP route is withdrawn and /ready fails.")
	dStalls         = desc("worker_stalls_total", "Times one or more workers were found stalled.")
	dTunProbe       = desc("tunnel_prober_packets_total", "Packets of the tunnel health prober (DSR probe = \"tunnel\"): read from its TUN device and sent encapsulated to a backend (sent), kernel traffic that is no probe (not_probe), segments of no live probe connection (unknown), failed sends (send_error) and reads (read_error).", "event")
)

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	prometheus.DescribeByCollect(c, ch)
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	m := c.p.Metrics()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	sum := dataplane.Sum(m.Workers...)
	for i, w := range m.Workers {
		id := strconv.Itoa(i)
		counter(dRxFrames, w.RxFrames, id)
		counter(dRxBytes, w.RxBytes, id)
		counter(dBatches, w.Batches, id)
		buckets := make(map[float64]uint64, len(w.BatchSizes))
		var cum uint64
		for b, n := range w.BatchSizes {
			cum += n
			if b < len(w.BatchSizes)-1 {
				buckets[float64(uint(1)<<b)] = cum
			}
		}
		ch <- prometheus.MustNewConstHistogram(dBatchSize, w.Batches, float64(w.BatchFrames), buckets, id)
	}
	for v := dataplane.Verdict(0); v < dataplane.Verdict(len(sum.Verdicts)); v++ {
		counter(dVerdicts, sum.Verdicts[v], v.String())
	}
	for _, r := range dataplane.DropReasons() {
		counter(dDrops, sum.Drops[r], r.String())
	}
	counter(dICMPSent, sum.ICMPSent)
	counter(dICMPLimited, sum.ICMPRateLimited)
	counter(dICMPSteered, sum.ICMPSteered)
	counter(dICMPRelay, sum.ICMPRelayed, "handed")
	counter(dICMPRelay, sum.ICMPRelayedIn, "received")
	counter(dICMPRelay, sum.ICMPNotRelayed, "not_relayed")
	counter(dL4Sampled, sum.L4ChecksumSampled)
	counter(dL4Bad, sum.L4ChecksumBad)
	counter(dFastOffered, sum.FastOffered)
	counter(dFastRetired, sum.FastRetired)
	counter(dFastErrors, sum.FastFlushErrors)
	counter(dFragments, sum.FragmentsOut)
	counter(dReplies, sum.Replies)
	counter(dLookups, sum.FlowHits, "hit")
	counter(dLookups, sum.FlowMisses, "miss")
	counter(dUntracked, sum.Untracked)
	counter(dRepicked, sum.Repicked)
	counter(dReused, sum.Reused)
	counter(dStateless, sum.Stateless)
	counter(dQUICRouted, sum.QUICRouted, "packets")
	counter(dQUICRouted, sum.QUICMoved, "moved")
	counter(dQUICRouted, sum.QUICICMPRouted, "icmp")
	for _, r := range dataplane.QUICFallbacks() {
		counter(dQUICFall, sum.QUICFallbacks[r], r.String())
	}
	counter(dHints, sum.HintedFlows, "flows")
	counter(dHints, sum.HintedPackets, "packets")
	for name, t := range m.PreviousUntil {
		gauge(dPrevUntil, float64(t.UnixNano())/1e9, name)
	}
	counter(dStateErrors, m.StateErrors)
	gauge(dStalled, float64(m.WorkersStalled))
	counter(dStalls, m.WorkerStalls)
	for id, name := range m.VIPNames {
		if int(id) < len(sum.VIPs) {
			f := sum.VIPs[id]
			counter(dVIPPackets, f.Packets, name)
			counter(dVIPBytes, f.Bytes, name)
			counter(dVIPNewFlows, f.NewFlows, name)
			if m.NATVIPs[id] {
				counter(dVIPOutPkts, f.OutPackets, name)
				counter(dVIPOutBytes, f.OutBytes, name)
			}
		}
	}
	for ref, l := range m.Backends {
		if int(ref) < len(sum.Backends) {
			f := sum.Backends[ref]
			counter(dBePackets, f.Packets, l.VIP, l.Backend)
			counter(dBeBytes, f.Bytes, l.VIP, l.Backend)
			counter(dBeNewFlows, f.NewFlows, l.VIP, l.Backend)
			if l.NAT {
				counter(dBeOutPkts, f.OutPackets, l.VIP, l.Backend)
				counter(dBeOutBytes, f.OutBytes, l.VIP, l.Backend)
			}
			counter(dBeHandshake, f.Handshakes, l.VIP, l.Backend)
			counter(dBeAnswered, f.Answered, l.VIP, l.Backend)
			if f.Handshakes > 0 {
				ch <- handshakeHistogram(&f, l.VIP, l.Backend)
			}
		}
		for _, st := range forwardingStates {
			v := 0.0
			if m.BackendUp[ref] == st.v {
				v = 1
			}
			gauge(dBeUp, v, l.VIP, l.Backend, st.name)
		}
		ej := 0.0
		if m.Ejected[ref] {
			ej = 1
		}
		gauge(dBeEjected, ej, l.VIP, l.Backend)
		counter(dBeEjections, m.Ejections[ref], l.VIP, l.Backend)
		counter(dBeHealthTr, m.HealthTransitions[ref], l.VIP, l.Backend)
		if at, ok := m.LastChange[ref]; ok {
			gauge(dBeLastChg, float64(at.UnixNano())/1e9, l.VIP, l.Backend)
		}
		if w, ok := m.EffectiveWeight[ref]; ok {
			gauge(dBeEffWeight, w, l.VIP, l.Backend)
		}
		counter(dBeLoadBad, m.LoadReportsMalformed[ref], l.VIP, l.Backend)
	}
	ct := m.Conntrack
	gauge(dCTEntries, float64(ct.Entries))
	gauge(dCTCapacity, float64(ct.Capacity))
	counter(dCTInserts, ct.Inserts)
	counter(dCTExpired, ct.Expirations)
	counter(dCTEvictions, ct.EvictedExpired, "expired")
	counter(dCTEvictions, ct.EvictedUnestablished, "unestablished")
	counter(dCTFull, ct.UntrackedFull)
	for name, v := range m.Driver {
		counter(dDriver, v, name)
	}
	for result, v := range m.Reloads {
		counter(dReloads, v, result)
	}
	for vip, v := range m.AllDown {
		counter(dAllDown, v, vip)
	}
	gauge(dReloadOK, b2f(m.Config.LastReloadOK))
	if !m.Config.LoadedAt.IsZero() {
		gauge(dReloadTime, float64(m.Config.LoadedAt.UnixNano())/1e9)
	}
	gauge(dConfigDiffer, b2f(m.Config.FileDiffers))
	if f := m.Fleet; f != nil {
		gauge(dFleetConnected, b2f(f.Connected))
		gauge(dFleetStale, b2f(f.Stale))
		gauge(dFleetRevision, float64(f.Revision))
		gauge(dFleetAge, f.AgeSeconds)
		counter(dFleetErrors, f.ApplyErrors)
		counter(dFleetCacheErr, f.CacheErrors)
	}
	gauge(dGeneration, float64(m.Generation))
	if m.Role != "" {
		for _, r := range []string{api.RoleActive, api.RoleStandby} {
			gauge(dRole, map[bool]float64{true: 1}[m.Role == r], r)
		}
		counter(dRoleChanges, m.RoleChanges)
	}
	gauge(dFastOn, map[bool]float64{true: 1}[m.FastPath])
	for event, v := range m.TunnelProber {
		counter(dTunProbe, v, event)
	}
	collectBGP(m.BGP, counter, gauge)
	collectChecks(m, ch)
	collectFlows(m, ch)
}

// b2f is 1 for true, 0 for false.
func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// handshakeHistogram is f's handshake times as a Prometheus histogram:
// cumulative buckets by dataplane.HandshakeBuckets, in seconds.
func handshakeHistogram(f *dataplane.FlowCounters, labels ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(dataplane.HandshakeBuckets))
	var acc uint64
	for i, le := range dataplane.HandshakeBuckets {
		acc += f.HandshakeTime[i]
		buckets[float64(le)/1e9] = acc
	}
	n := acc + f.HandshakeTime[len(dataplane.HandshakeBuckets)]
	return prometheus.MustNewConstHistogram(dBeHSTime, n, float64(f.HandshakeNanos)/1e9, buckets, labels...)
}

// forwardingStates are the states of vipd_backend_forwarding's state
// label, by Metrics.BackendUp's value.
var forwardingStates = [...]struct {
	name string
	v    float64
}{{"up", 1}, {"draining", 0.5}, {"down", 0}}
