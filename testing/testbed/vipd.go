package testbed

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/admin/client"
	"github.com/vipd/vipd/testing/nstest"
	"github.com/vipd/vipd/testing/testkit"
)

// AdminAddr is where the bed's vipd serves its admin API (inside the box
// namespace).
const AdminAddr = "127.0.0.1:9180"

// AdminSocket is where the bed's vipd serves its admin socket (drains):
// in the bed's own directory, so that runs do not collide.
func (b *Bed) AdminSocket() string { return filepath.Join(b.dir, "admin.sock") }

// Path is name in the bed's directory, which goes with the bed.
func (b *Bed) Path(name string) string { return filepath.Join(b.dir, name) }

// VIPD is a vipd process running in the box.
type VIPD struct {
	bed    *Bed
	ns     *nstest.NS
	cmd    *exec.Cmd
	Config string // path of its configuration file
	name   string
	client *http.Client
}

// StartVIPD writes cfg and runs vipd on it in the box, with extra flags,
// waiting until its admin API answers.
func (b *Bed) StartVIPD(cfg string, flags ...string) *VIPD {
	b.t.Helper()
	return b.StartVIPDIn(b.Box, "vipd.toml", cfg, flags...)
}

// StartVIPDIn is StartVIPD in namespace ns, with the configuration written
// to file (in the bed's directory): one of several boxes.
func (b *Bed) StartVIPDIn(ns *nstest.NS, file, cfg string, flags ...string) *VIPD {
	b.t.Helper()
	v := &VIPD{bed: b, ns: ns, Config: filepath.Join(b.dir, file)}
	v.name = fmt.Sprintf("vipd-%d", time.Now().UnixNano())
	if err := os.WriteFile(v.Config, []byte(cfg), 0o644); err != nil {
		b.t.Fatalf("testbed: %v", err)
	}
	v.client = &http.Client{Transport: &http.Transport{DialContext: Dialer(ns), DisableKeepAlives: true}, Timeout: 20 * time.Second}
	v.cmd = b.Spawn(ns, v.name, b.Bin.VIPD, append([]string{"-config", v.Config, "-log-level", "debug"}, flags...)...)
	var err error
	if !testkit.Poll(patience, func() bool {
		var resp *http.Response
		if resp, err = v.client.Get("http://" + AdminAddr + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		if v.cmd.ProcessState != nil {
			b.t.Fatalf("testbed: vipd did not come up: %v\n%s", err, b.Log(v.name))
		}
		return false
	}) {
		b.t.Fatalf("testbed: vipd did not come up: %v\n%s", err, b.Log(v.name))
	}
	return v
}

// Log returns vipd's output so far.
func (v *VIPD) Log() string { return v.bed.Log(v.name) }

// PID is the vipd process id.
func (v *VIPD) PID() int { return v.cmd.Process.Pid }

// State fetches /v1/state.
func (v *VIPD) State() (*api.State, error) {
	var st api.State
	return &st, v.getJSON("/v1/state", &st)
}

// getJSON reads the admin server's answer at path into into.
func (v *VIPD) getJSON(path string, into any) error {
	resp, err := v.client.Get("http://" + AdminAddr + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %s", resp.Status, b)
	}
	return json.NewDecoder(resp.Body).Decode(into)
}

// Metrics fetches and parses /metrics.
func (v *VIPD) Metrics() (map[string]*dto.MetricFamily, error) {
	resp, err := v.client.Get("http://" + AdminAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// Metric returns the sum of the samples of family name whose labels
// include all of want (name=value pairs), or 0.
func Metric(fams map[string]*dto.MetricFamily, name string, want ...string) float64 {
	f, ok := fams[name]
	if !ok {
		return 0
	}
	total := 0.0
next:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(want); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				found = found || (l.GetName() == want[i] && l.GetValue() == want[i+1])
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.GetCounter() != nil:
			total += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			total += m.GetGauge().GetValue()
		}
	}
	return total
}

// Drain drains or undrains a backend through the admin socket (the bed's
// configurations set it to AdminSocket).
func (v *VIPD) Drain(vip, backend string, on bool) error {
	return client.Drain(context.Background(), v.bed.AdminSocket(), vip, backend, on, "")
}

// Reload rewrites the configuration and sends SIGHUP, then waits until the
// reload counter of the given result (ok or error) moves.
func (v *VIPD) Reload(cfg, wantResult string) error {
	before := v.reloads(wantResult)
	if err := os.WriteFile(v.Config, []byte(cfg), 0o644); err != nil {
		return err
	}
	v.cmd.Process.Signal(syscall.SIGHUP)
	if testkit.Poll(patience, func() bool { return v.reloads(wantResult) > before }) {
		return nil
	}
	return fmt.Errorf("no %s reload within %v:\n%s", wantResult, patience, v.Log())
}

func (v *VIPD) reloads(result string) float64 {
	fams, err := v.Metrics()
	if err != nil {
		return -1
	}
	return Metric(fams, "vipd_config_reloads_total", "result", result)
}

// Where asks vipd which backend a new flow from client ("addr:port") to
// the VIP named vip gets.
func (v *VIPD) Where(vip, client string) (*api.WhereAnswer, error) {
	var a api.WhereAnswer
	return &a, v.getJSON("/v1/where?vip="+vip+"&client="+client, &a)
}

// Kill SIGKILLs vipd, as a crash would, and waits for it.
func (v *VIPD) Kill() {
	v.cmd.Process.Kill()
	v.cmd.Wait()
}

// Stop sends SIGTERM and waits for a clean exit.
func (v *VIPD) Stop() error {
	st, err := stopProcess(v.cmd, patience)
	if err != nil {
		return err
	}
	if !st.Success() {
		return fmt.Errorf("vipd exited with %v:\n%s", st, v.Log())
	}
	return nil
}

// HTTPClient returns a client whose connections start in the client
// namespace, one connection per request (a fresh flow each time).
func (b *Bed) HTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Transport: &http.Transport{DialContext: Dialer(b.Client), DisableKeepAlives: true},
		Timeout:   timeout,
	}
}

// Get fetches url from the client namespace and returns the body.
func Get(ctx context.Context, c *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, b)
	}
	return string(b), nil
}

// RunVIPDExpectExit runs vipd on cfg in the box and waits (at most
// timeout) for it to exit, for configurations it must refuse. It returns
// vipd's output and its exit error (nil for status 0).
func (b *Bed) RunVIPDExpectExit(cfg string, timeout time.Duration) (string, error) {
	b.t.Helper()
	path := filepath.Join(b.dir, "refused.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		b.t.Fatalf("testbed: %v", err)
	}
	name := fmt.Sprintf("vipd-refused-%d", time.Now().UnixNano())
	cmd := b.Spawn(b.Box, name, b.Bin.VIPD, "-config", path)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return b.Log(name), err
	case <-time.After(timeout):
		cmd.Process.Kill()
		<-done
		b.t.Fatalf("testbed: vipd did not exit within %v:\n%s", timeout, b.Log(name))
	}
	return "", nil
}

// Page fetches path (the status page: "/") from the admin listener and
// returns its body.
func (v *VIPD) Page(path string) (string, error) {
	return Get(context.Background(), v.client, "http://"+AdminAddr+path)
}
