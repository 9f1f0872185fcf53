package rig

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vipd/vipd/testing/nstest"
	"github.com/vipd/vipd/testing/testbed"
)

// BoxCounters are a box program's own cumulative counters.
type BoxCounters struct {
	// SockDrops: frames its sockets dropped (AF_XDP rx ring full or no
	// fill-ring frame; AF_PACKET ring full).
	SockDrops float64
	QueueRx   []float64 // frames received per queue
	Batches   float64   // receive batches that carried frames
	Kicks     float64   // sendto calls (AF_XDP transmit wakeups)
	FillEmpty float64   // times the kernel found the fill ring empty
	// PipelineDrops: frames vipd's pipeline dropped (any reason).
	PipelineDrops float64
	// Flows: vipd's live connection-table entries (a gauge), -1 if none.
	Flows float64
	// BatchFrames and BatchCount: the sum and count of vipd's
	// vipd_worker_batch_size histogram (frames per batch), over workers.
	BatchFrames, BatchCount float64
}

// Box is a program serving the box's interfaces.
type Box interface {
	Counters() (BoxCounters, error)
	PID() int
}

// proc is a process started in a namespace, stopped by PID at cleanup.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// Placement is where a box program runs: the CPUs it may use and its
// nice value (0: unchanged), which is also given to the autogroup of the
// session it then leads.
type Placement struct {
	CPUs string
	Nice int
	// Env is added to the program's environment (KEY=VALUE), for a row
	// that sets GOMAXPROCS.
	Env []string
}

func startProc(t nstest.T, ns *nstest.NS, pl Placement, logPath string, stdout io.Writer, bin string, args ...string) *proc {
	t.Helper()
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("rig: %v", err)
	}
	full := []string{"netns", "exec", ns.Name}
	if pl.Nice != 0 {
		full = append(full, "nice", "-n", strconv.Itoa(pl.Nice))
	}
	full = append(append(full, "taskset", "-c", pl.CPUs, bin), args...)
	cmd := exec.Command("ip", full...)
	if len(pl.Env) > 0 {
		cmd.Env = append(os.Environ(), pl.Env...)
	}
	cmd.Stderr = f
	cmd.Stdout = f
	if stdout != nil {
		cmd.Stdout = stdout
	}
	if pl.Nice != 0 {
		// A session of its own is an autogroup of its own, whose weight
		// is set below: with autogroups on, a nice value only counts
		// within the group.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("rig: start %s: %v", filepath.Base(bin), err)
	}
	if pl.Nice != 0 {
		err := os.WriteFile("/proc/"+strconv.Itoa(cmd.Process.Pid)+"/autogroup", []byte(strconv.Itoa(pl.Nice)), 0)
		if err != nil && !errors.Is(err, os.ErrNotExist) { // no file: no autogroups
			cmd.Process.Kill()
			cmd.Wait()
			f.Close()
			t.Fatalf("rig: autogroup nice of %s: %v", filepath.Base(bin), err)
		}
	}
	p := &proc{cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() {
		cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(p.stop)
	return p
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and, after 10 s, SIGKILL; ip netns exec has exec'd
// nice and taskset, which exec'd the program: the PID is the program's.
func (p *proc) stop() {
	if !p.running() {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) output() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// Forwarder is bench/cmd/xdpfwd running in the box.
type Forwarder struct {
	p     *proc
	mu    sync.Mutex
	lines chan string
}

// StartForwarder runs the bare AF_XDP forwarder in the box where pl says,
// forwarding what arrives for VIPNAT to the sink.
func StartForwarder(t nstest.T, r *Rig, bin string, pl Placement, dir string, args ...string) *Forwarder {
	t.Helper()
	pr, pw := io.Pipe()
	f := &Forwarder{lines: make(chan string, 16)}
	f.p = startProc(t, r.Box, pl, filepath.Join(dir, "xdpfwd.log"), pw, bin,
		append([]string{"-in", BoxIn, "-out", BoxOut, "-queues", strconv.Itoa(r.Queues), "-dst-mac", DropMAC, "-vip", VIPNAT.String()}, args...)...)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			select {
			case f.lines <- sc.Text():
			default:
			}
		}
	}()
	go func() { <-f.p.done; pw.Close() }()
	select {
	case l := <-f.lines:
		if strings.Contains(l, "ready") {
			return f
		}
		t.Fatalf("rig: xdpfwd: unexpected %q", l)
	case <-f.p.done:
	case <-time.After(15 * time.Second):
	}
	t.Fatalf("rig: xdpfwd did not come up:\n%s", f.p.output())
	return nil
}

func (f *Forwarder) PID() int { return f.p.cmd.Process.Pid }

// Counters asks the forwarder for its counters (SIGUSR1, one JSON line).
func (f *Forwarder) Counters() (BoxCounters, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.lines) > 0 {
		<-f.lines
	}
	if err := f.p.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		return BoxCounters{}, err
	}
	select {
	case l := <-f.lines:
		var st struct {
			RxDropped, RxRingFull, RxFillRingEmpty, Kicks float64
			Batches                                       float64   `json:"batches"`
			PerQueue                                      []float64 `json:"per_queue_rx"`
		}
		if err := json.Unmarshal([]byte(l), &st); err != nil {
			return BoxCounters{}, fmt.Errorf("xdpfwd stats %q: %w", l, err)
		}
		return BoxCounters{SockDrops: st.RxDropped + st.RxRingFull, QueueRx: st.PerQueue, Batches: st.Batches,
			Kicks: st.Kicks, FillEmpty: st.RxFillRingEmpty, Flows: -1}, nil
	case <-time.After(2 * time.Second):
		return BoxCounters{}, fmt.Errorf("xdpfwd: no stats within 2 s")
	}
}

// AdminAddr is where the rig's vipd serves /metrics, inside the box.
const AdminAddr = "127.0.0.1:9180"

// VIPDConfig is the rig's vipd configuration: a UDP NAT VIP and a UDP DSR
// VIP over the three backends, no health checks (the backends are only
// addresses), io and queues as given.
func VIPDConfig(io string, queues int, dataplane ...string) string {
	var s strings.Builder
	fmt.Fprintf(&s, "[dataplane]\ningress = %q\negress = %q\nio = %q\nqueues = %d\n", BoxIn, BoxOut, io, queues)
	for _, l := range dataplane {
		s.WriteString(l + "\n")
	}
	s.WriteString("\n")
	fmt.Fprintf(&s, "[conntrack]\ncapacity = 262144\n\n[admin]\nlisten = %q\nsocket = \"\"\n\n", AdminAddr)
	vip := func(name, addr, mode string, bport int) {
		fmt.Fprintf(&s, "[[vip]]\nname = %q\naddress = %q\nport = %d\nprotocol = \"udp\"\nmode = %q\n", name, addr, VIPPort, mode)
		if mode == "dsr" {
			fmt.Fprintf(&s, "encap_source = %q\n", BoxEgress)
		}
		s.WriteString("\n[vip.healthcheck]\ntype = \"none\"\n\n")
		for _, b := range Backends {
			fmt.Fprintf(&s, "[[vip.backend]]\naddress = %q\n", b)
			if bport != 0 {
				fmt.Fprintf(&s, "port = %d\n", bport)
			}
		}
		s.WriteString("\n")
	}
	vip("udp-nat", VIPNAT.String(), "nat", BackendPort)
	vip("udp-dsr", VIPDSR.String(), "dsr", 0)
	return s.String()
}

// VIPD is the vipd binary running in the box.
type VIPD struct {
	p      *proc
	io     string
	client *http.Client
}

// StartVIPD writes the configuration, with extra lines for its
// [dataplane] table, and runs vipd where pl says, waiting for its admin
// API.
func StartVIPD(t nstest.T, r *Rig, bin string, pl Placement, io, dir string, dataplane ...string) *VIPD {
	t.Helper()
	cfg := filepath.Join(dir, "vipd.toml")
	if err := os.WriteFile(cfg, []byte(VIPDConfig(io, r.Queues, dataplane...)), 0o644); err != nil {
		t.Fatalf("rig: %v", err)
	}
	v := &VIPD{io: io, client: &http.Client{
		Transport: &http.Transport{DialContext: testbed.Dialer(r.Box), DisableKeepAlives: true},
		Timeout:   5 * time.Second,
	}}
	v.p = startProc(t, r.Box, pl, filepath.Join(dir, "vipd.log"), nil, bin, "-config", cfg, "-log-level", "warn")
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := v.client.Get("http://" + AdminAddr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return v
			}
		}
		if !v.p.running() || time.Now().After(deadline) {
			t.Fatalf("rig: vipd did not come up: %v\n%s", err, v.p.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (v *VIPD) PID() int { return v.p.cmd.Process.Pid }

// Log is what vipd printed so far.
func (v *VIPD) Log() string { return v.p.output() }

// Metrics scrapes /metrics.
func (v *VIPD) Metrics() (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+AdminAddr+"/metrics", nil)
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// Counters implements Box from /metrics.
func (v *VIPD) Counters() (BoxCounters, error) {
	fams, err := v.Metrics()
	if err != nil {
		return BoxCounters{}, err
	}
	ev := func(name string) float64 { return testbed.Metric(fams, "vipd_driver_events_total", "event", name) }
	c := BoxCounters{
		Batches:       testbed.Metric(fams, "vipd_worker_batches_total"),
		Kicks:         ev("tx_kicks"),
		FillEmpty:     ev("xsk_fill_ring_empty"),
		PipelineDrops: testbed.Metric(fams, "vipd_drops_total"),
		Flows:         testbed.Metric(fams, "vipd_conntrack_entries"),
	}
	if f := fams["vipd_worker_batch_size"]; f != nil {
		for _, m := range f.GetMetric() {
			if h := m.GetHistogram(); h != nil {
				c.BatchFrames += h.GetSampleSum()
				c.BatchCount += float64(h.GetSampleCount())
			}
		}
	}
	if v.io == "afpacket" {
		c.SockDrops = ev("rx_ring_dropped")
	} else {
		c.SockDrops = ev("xsk_rx_dropped") + ev("xsk_rx_ring_full")
	}
	if f := fams["vipd_rx_frames_total"]; f != nil {
		c.QueueRx = make([]float64, len(f.GetMetric()))
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "worker" {
					if i, err := strconv.Atoi(l.GetValue()); err == nil && i < len(c.QueueRx) {
						c.QueueRx[i] = m.GetCounter().GetValue()
					}
				}
			}
		}
	}
	return c, nil
}

// NFTRules is the nftables ruleset of the DNAT scenario: what a user would
// deploy instead of vipd, spreading the VIP over the backends by a hash of
// the client's address and port.
func NFTRules() string {
	return fmt.Sprintf(`table ip vipdbench {
	chain pre {
		type nat hook prerouting priority dstnat; policy accept;
		ip daddr %s udp dport %d dnat to jhash ip saddr . udp sport mod 3 map { 0 : %s, 1 : %s, 2 : %s } : %d
	}
}
`, VIPNAT, VIPPort, Backends[0], Backends[1], Backends[2], BackendPort)
}

// SetupNFT turns on forwarding in the box and loads NFTRules.
func SetupNFT(t nstest.T, r *Rig, dir string) {
	t.Helper()
	r.Box.Sysctl(t, "net.ipv4.ip_forward", "1")
	f := filepath.Join(dir, "rules.nft")
	if err := os.WriteFile(f, []byte(NFTRules()), 0o644); err != nil {
		t.Fatalf("rig: %v", err)
	}
	r.Box.Must(t, "nft", "-f", f)
}
