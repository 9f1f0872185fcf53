package admin

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/admin/client"
)

// connsProvider is fakeProvider with connections: it answers every query
// with the query it got, in the first flow's VIP field.
type connsProvider struct {
	fakeProvider
	got api.ConnsQuery
}

func (p *connsProvider) Conns(_ context.Context, q api.ConnsQuery) (*api.Conns, error) {
	p.got = q
	if q.VIP == "nope" {
		return nil, api.ErrNotFound
	}
	return &api.Conns{Limit: q.Limit, Truncated: q.Limit == 1, Conns: []api.Conn{{
		Protocol: "tcp", Client: "198.18.0.1:40000", VIP: "web", VIPAddress: "198.18.1.1:80",
		Backend: "198.18.2.1:8080", State: "Established", AgeSeconds: 3600, IdleSeconds: 3, FastPath: "eligible",
	}, {
		Protocol: "udp", Client: "198.18.0.2:53", VIP: "dns", VIPAddress: "198.18.1.2:53",
		Backend: "198.18.2.2", State: "UDP", FastPath: "off", Previous: "198.18.2.9",
	}}}, nil
}

func TestConnsEndpoint(t *testing.T) {
	p := &connsProvider{}
	srv := httptest.NewServer(Handler(p, ReadOnly))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	tests := []struct {
		name    string
		q       api.ConnsQuery
		want    api.ConnsQuery
		wantErr string
	}{
		{"no filter", api.ConnsQuery{}, api.ConnsQuery{Limit: api.DefaultConnsLimit}, ""},
		{"filters", api.ConnsQuery{VIP: "web", Client: "198.18.0.1", Backend: "198.18.2.1:8080", Limit: 5},
			api.ConnsQuery{VIP: "web", Client: "198.18.0.1", Backend: "198.18.2.1:8080", Limit: 5}, ""},
		{"capped", api.ConnsQuery{Limit: api.MaxConnsLimit + 1}, api.ConnsQuery{Limit: api.MaxConnsLimit}, ""},
		{"unknown VIP", api.ConnsQuery{VIP: "nope"}, api.ConnsQuery{VIP: "nope", Limit: api.DefaultConnsLimit}, "not found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := client.FetchConns(context.Background(), addr, tc.q)
			if p.got != tc.want {
				t.Errorf("server got %+v, want %+v", p.got, tc.want)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || len(c.Conns) != 2 || c.Limit != tc.want.Limit {
				t.Fatalf("FetchConns: %+v, %v", c, err)
			}
		})
	}
	if _, err := client.FetchConns(context.Background(), addr, api.ConnsQuery{Limit: -1}); err != nil {
		t.Errorf("a negative limit is the default: %v", err)
	}
}

func TestConnsNotImplemented(t *testing.T) {
	srv := httptest.NewServer(Handler(&fakeProvider{}, ReadOnly))
	defer srv.Close()
	if _, err := client.FetchConns(context.Background(), strings.TrimPrefix(srv.URL, "http://"), api.ConnsQuery{}); err == nil {
		t.Fatal("a provider without Conns listed connections")
	}
}
