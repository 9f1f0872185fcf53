package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/vipd/vipd/control/admin/api"
)

// FetchState gets /v1/state from the admin server at addr (host:port).
func FetchState(ctx context.Context, addr string) (*api.State, error) {
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
	var st api.State
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("admin server at %s: bad state: %w", addr, err)
	}
	return &st, nil
}

// Where asks the admin server at addr which backend a new flow would get.
func Where(ctx context.Context, addr, vip, client string, port uint16) (*api.WhereAnswer, error) {
	u := fmt.Sprintf("http://%s/v1/where?vip=%s&client=%s&port=%d", addr, url.QueryEscape(vip), url.QueryEscape(client), port)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("admin server at %s: %w", addr, err)
	}
	var a api.WhereAnswer
	return &a, answer(resp, &a)
}

// FetchConns gets /v1/conns from the admin server at addr (host:port).
func FetchConns(ctx context.Context, addr string, q api.ConnsQuery) (*api.Conns, error) {
	ctx, cancel := context.WithTimeout(ctx, 35*time.Second)
	defer cancel()
	v := url.Values{}
	for k, s := range map[string]string{"vip": q.VIP, "client": q.Client, "backend": q.Backend} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	u := "http://" + addr + "/v1/conns"
	if len(v) > 0 {
		u += "?" + v.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("admin server at %s: %w (is vipd running, and is [admin] listen this address?)", addr, err)
	}
	var c api.Conns
	if err := answer(resp, &c); err != nil {
		return nil, fmt.Errorf("admin server at %s: %w", addr, err)
	}
	return &c, nil
}

// answer reads an admin server's reply into into (nil: no body wanted) and
// closes it; a status other than 200 is an error with the server's text.
func answer(resp *http.Response, into any) error {
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return errors.New(strings.TrimSpace(string(b)))
	}
	if into == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(into)
}

// FetchEvents gets the event log after sequence number since (GET
// /v1/events), at most max events (0: all vipd keeps).
func FetchEvents(ctx context.Context, addr string, since uint64, max int) (*api.EventsAnswer, error) {
	u := fmt.Sprintf("http://%s/v1/events?since=%d&max=%d", addr, since, max)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	var ans api.EventsAnswer
	return &ans, answer(resp, &ans)
}
