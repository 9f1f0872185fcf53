//go:build linux

package tunprobe

import (
	"errors"
	"fmt"
	"net"

	"github.com/jsimonetti/rtnetlink/v2"
	"golang.org/x/sys/unix"
)

// rule is a routing rule New added: fwmark Mark → lookup Table, of a
// family.
type rule struct{ family uint8 }

// ruleMessage is the rule of family that the prober owns.
func (p *Prober) ruleMessage(family uint8) *rtnetlink.RuleMessage {
	table, prio, mark, mask := p.opts.Table, p.opts.Priority, p.opts.Mark, uint32(0xffffffff)
	return &rtnetlink.RuleMessage{
		Family: family, Table: unix.RT_TABLE_UNSPEC, Action: unix.FR_ACT_TO_TBL,
		Attributes: &rtnetlink.RuleAttributes{Table: &table, Priority: &prio, FwMark: &mark, FwMask: &mask},
	}
}

// ours reports whether m is the prober's rule of its family: the same
// priority, mark, mask and table, and nothing else.
func (p *Prober) ours(m *rtnetlink.RuleMessage) bool {
	a := m.Attributes
	if a == nil || m.Action != unix.FR_ACT_TO_TBL || a.Priority == nil || a.FwMark == nil || a.Table == nil ||
		a.Src != nil || a.Dst != nil || a.IIFName != nil || a.OIFName != nil {
		return false
	}
	mask := uint32(0xffffffff)
	if a.FwMask != nil {
		mask = *a.FwMask
	}
	return *a.Priority == p.opts.Priority && *a.FwMark == p.opts.Mark && mask == 0xffffffff && *a.Table == p.opts.Table
}

// setupRoutes adds, for each family with a source, the default route into
// the TUN in Table and the rule that sends marked sockets there, after
// removing a stale rule (a crashed run's; its routes went with its TUN).
func (p *Prober) setupRoutes() error {
	c, err := rtnetlink.Dial(nil)
	if err != nil {
		return fmt.Errorf("tunprobe: rtnetlink: %w", err)
	}
	defer c.Close()
	ifi, err := net.InterfaceByName(p.opts.TUN)
	if err != nil {
		return fmt.Errorf("tunprobe: %w", err)
	}
	existing, err := c.Rule.List()
	if err != nil {
		return fmt.Errorf("tunprobe: list rules: %w", err)
	}
	for _, fam := range p.families() {
		for i := range existing {
			if m := &existing[i]; m.Family == fam && p.ours(m) {
				p.opts.Logger.Info("tunprobe: removing a stale probe routing rule", "family", famName(fam), "mark", p.opts.Mark, "table", p.opts.Table)
				if err := c.Rule.Delete(p.ruleMessage(fam)); err != nil && !errors.Is(err, unix.ENOENT) {
					return fmt.Errorf("tunprobe: delete stale %s rule: %w", famName(fam), err)
				}
			}
		}
		route := &rtnetlink.RouteMessage{
			Family: fam, Table: unix.RT_TABLE_UNSPEC, Protocol: unix.RTPROT_STATIC,
			Scope: unix.RT_SCOPE_LINK, Type: unix.RTN_UNICAST,
			Attributes: rtnetlink.RouteAttributes{OutIface: uint32(ifi.Index), Table: p.opts.Table},
		}
		if fam == unix.AF_INET6 {
			route.Scope = unix.RT_SCOPE_UNIVERSE
		}
		if err := c.Route.Replace(route); err != nil {
			return fmt.Errorf("tunprobe: %s default route in table %d: %w", famName(fam), p.opts.Table, err)
		}
		if err := c.Rule.Add(p.ruleMessage(fam)); err != nil {
			return fmt.Errorf("tunprobe: %s rule fwmark %#x lookup %d: %w", famName(fam), p.opts.Mark, p.opts.Table, err)
		}
		p.rules = append(p.rules, rule{fam})
	}
	return nil
}

// removeRules deletes the rules setupRoutes added. (The routes go with
// the TUN.)
func (p *Prober) removeRules() error {
	c, err := rtnetlink.Dial(nil)
	if err != nil {
		return fmt.Errorf("tunprobe: rtnetlink: %w", err)
	}
	defer c.Close()
	var errs []error
	for _, r := range p.rules {
		if err := c.Rule.Delete(p.ruleMessage(r.family)); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("tunprobe: delete %s rule: %w", famName(r.family), err))
		}
	}
	p.rules = nil
	return errors.Join(errs...)
}

func (p *Prober) families() []uint8 {
	var f []uint8
	if p.opts.Source4.IsValid() {
		f = append(f, unix.AF_INET)
	}
	if p.opts.Source6.IsValid() {
		f = append(f, unix.AF_INET6)
	}
	return f
}

func famName(f uint8) string {
	if f == unix.AF_INET6 {
		return "IPv6"
	}
	return "IPv4"
}
