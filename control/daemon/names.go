package daemon

import (
	"github.com/vipd/vipd/control/admin/api"
	"github.com/vipd/vipd/control/config"
)

// ResolveVIP returns the VIP of cfg that q names, by the forgiving rules
// of api.ResolveVIP (its name, ADDR:PORT[/PROTO], or an unambiguous
// address); an unknown or ambiguous name is an *api.NameError that
// lists the candidates.
func ResolveVIP(cfg *config.Config, q string) (*config.VIP, error) {
	names := make([]api.VIPName, len(cfg.VIPs))
	for i := range cfg.VIPs {
		names[i] = vipName(&cfg.VIPs[i])
	}
	i, err := api.ResolveVIP(names, q)
	if err != nil {
		return nil, err
	}
	return &cfg.VIPs[i], nil
}

// ResolveBackend returns the backend of v that q names, by the rules of
// api.ResolveBackend (ADDR:PORT, or ADDR when its port is unambiguous).
func ResolveBackend(v *config.VIP, q string) (*config.Backend, error) {
	names := make([]api.BackendName, len(v.Backends))
	for i := range v.Backends {
		names[i] = api.BackendName{Addr: v.Backends[i].Address, Port: v.Backends[i].Port}
	}
	i, err := api.ResolveBackend(vipName(v), names, q)
	if err != nil {
		return nil, err
	}
	return &v.Backends[i], nil
}

func vipName(v *config.VIP) api.VIPName {
	return api.VIPName{Name: v.Name, Addr: v.Address, Port: v.Port, Proto: string(v.Protocol)}
}

// backendLabel names b as the admin API shows it: ADDR:PORT, or ADDR
// when its port is 0.
func backendLabel(b *config.Backend) string {
	return api.BackendName{Addr: b.Address, Port: b.Port}.String()
}
