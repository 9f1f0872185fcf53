package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"
)

// FetchState gets /v1/state from the admin server at addr (host:port).
func FetchState(ctx context.Context, addr string) (*State, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/state", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("admin server at %s: %w (is vipd running, and is [admin] listen this address?)", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("admin server at %s: %s: %s", addr, resp.Status, strings.TrimSpace(string(b)))
	}
	var st State
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("admin server at %s: bad state: %w", addr, err)
	}
	return &st, nil
}

// Drain asks the admin server at addr to drain (or undrain) a backend.
func Drain(ctx context.Context, addr, vip, backend string, drain bool) error {
	body, _ := json.Marshal(DrainRequest{VIP: vip, Backend: backend, Drain: &drain})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/drain", strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("admin server at %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("%s", strings.TrimSpace(string(b)))
	}
	return nil
}

// WriteStatus prints st like `ipvsadm -Ln`: one line per VIP, one per
// backend with its weight, state and flows.
func WriteStatus(w io.Writer, st *State) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "vipd %s  io %s  workers %d  config %s (loaded %s)  snapshot %d\n",
		st.Version, st.IO, st.Workers, st.ConfigFile, st.LoadedAt.Format(time.RFC3339), st.Generation)
	fmt.Fprintf(tw, "conntrack %d/%d flows\n", st.Conntrack.Entries, st.Conntrack.Capacity)
	fmt.Fprintf(tw, "Prot\tVIP:Port\tMode\tScheduler\tFlags\t\t\t\n")
	fmt.Fprintf(tw, "  ->\tBackend:Port\tWeight\tForward\tHealth\tActiveFlows\tNewFlows\tPackets\n")
	for _, v := range st.VIPs {
		flags := v.FlowHash
		if v.AllDown {
			flags += ",ALL-DOWN(" + v.OnAllDown + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\tmaglev M=%d\t%s\t\t\t\n", strings.ToUpper(v.Protocol), hostPort(v.Address, v.Port), v.Mode, v.TableSize, flags)
		for _, b := range v.Backends {
			fwd := b.Forwarding
			if b.Drained {
				fwd += "(drain)"
			}
			if b.SlowStart > 0 && b.SlowStart < 1 {
				fwd += fmt.Sprintf("(ramp %.0f%%)", 100*b.SlowStart)
			}
			port := b.Port
			if port == 0 {
				port = v.Port
			}
			fmt.Fprintf(tw, "  ->\t%s\t%d\t%s\t%s\t%d\t%d\t%d\n", hostPort(b.Address, port), b.Weight, fwd, b.Health, b.ActiveFlows, b.NewFlows, b.Packets)
		}
	}
	return tw.Flush()
}

func hostPort(addr string, port uint16) string {
	p := "*"
	if port != 0 {
		p = fmt.Sprint(port)
	}
	if strings.Contains(addr, ":") {
		return "[" + addr + "]:" + p
	}
	return addr + ":" + p
}

// Where asks the admin server at addr which backend a new flow would get.
func Where(ctx context.Context, addr, vip, client string, port uint16) (*WhereAnswer, error) {
	u := fmt.Sprintf("http://%s/v1/where?vip=%s&client=%s&port=%d", addr, url.QueryEscape(vip), url.QueryEscape(client), port)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("admin server at %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("%s", strings.TrimSpace(string(b)))
	}
	var a WhereAnswer
	return &a, json.NewDecoder(resp.Body).Decode(&a)
}
