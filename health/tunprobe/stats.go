package tunprobe

import "sync/atomic"

// Stats counts the packets the prober read from its TUN.
type Stats struct {
	Sent uint64 // encapsulated and sent to a backend
	// NotProbe counts packets that are not TCP from a probe socket: the
	// kernel's own IPv6 traffic on the device (router solicitations,
	// MLD reports).
	NotProbe uint64
	// Unknown counts TCP segments of no registered connection: a probe
	// socket that outlived its connection's Linger.
	Unknown    uint64
	SendErrors uint64
	ReadErrors uint64
}

// Add returns the sum of s and o, field by field.
func (s Stats) Add(o Stats) Stats {
	return Stats{Sent: s.Sent + o.Sent, NotProbe: s.NotProbe + o.NotProbe, Unknown: s.Unknown + o.Unknown,
		SendErrors: s.SendErrors + o.SendErrors, ReadErrors: s.ReadErrors + o.ReadErrors}
}

type counters struct {
	sent, notProbe, unknown, sendErrors, readErrors atomic.Uint64
}

func (c *counters) snapshot() Stats {
	return Stats{Sent: c.sent.Load(), NotProbe: c.notProbe.Load(), Unknown: c.unknown.Load(),
		SendErrors: c.sendErrors.Load(), ReadErrors: c.readErrors.Load()}
}
