package admin

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"html/template"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vipd/vipd/control/admin/api"
)

//go:embed page.html
var pageHTML string

// pageTemplate is the status page. html/template escapes every value by
// the context it lands in (text, attribute, URL): a VIP named
// "<script>" shows as text.
var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"hostport":      api.HostPort,
	"num":           groupDigits,
	"bytes":         humanBytes,
	"age":           age,
	"weight":        func(f float64) string { return strconv.FormatFloat(f, 'g', 4, 64) },
	"announceClass": announceClass,
	"quicFlag":      (*api.QUICLBState).Summary,
	"rate":          rate,
	"byteRate":      func(f float64) string { return humanBytes(uint64(max(f, 0))) + "/s" },
	"pct":           func(f float64) string { return strconv.FormatFloat(100*f, 'f', 0, 64) + "%" },
	"secs":          api.Seconds,
	"deref":         func(p *uint64) uint64 { return *p },
	"spark":         spark,
	"vipHist": func(h *api.Histories, vip string) *api.History {
		if h == nil {
			return nil
		}
		return h.VIPs[vip]
	},
	"beHist": beHist,
}).Parse(pageHTML))

// pageRefresh is how often the page reloads itself by default (seconds);
// ?refresh=N changes it, 0 turns it off.
const pageRefresh = 2

// pageData is what page.html renders: the api.State of /v1/state
// (embedded, so a field added to it is there too) and the page's own
// values.
type pageData struct {
	*api.State
	Now     time.Time // when the page was rendered, UTC
	Refresh int       // seconds between reloads, 0: none
	// Events are the last pageEvents of the event log, newest first.
	Events []api.Event
	// Hist is the last five minutes of the VIPs and backends.
	Hist *api.Histories
}

// pageEvents is how many events the page lists.
const pageEvents = 20

// pageHandler serves the status page: State rendered server-side, a meta
// refresh reloading it, and nothing else — no script, no external asset,
// so it works offline and a Content-Security-Policy of 'none' holds.
func pageHandler(p Provider) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		refresh := pageRefresh
		if s := r.URL.Query().Get("refresh"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 || n > 3600 {
				http.Error(w, "refresh must be 0..3600 (seconds; 0: never)", http.StatusBadRequest)
				return
			}
			refresh = n
		}
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		st, err := p.State(ctx)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		var buf bytes.Buffer
		evs := p.Events(0, pageEvents).Events
		slices.Reverse(evs)
		data := pageData{State: st, Now: time.Now().UTC(), Refresh: refresh, Events: evs, Hist: p.Histories()}
		if err := pageTemplate.Execute(&buf, data); err != nil {
			http.Error(w, "status page: "+err.Error(), http.StatusInternalServerError)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-store")
		// Inline styles only; no script, frame, image or fetch of any kind.
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		w.Write(buf.Bytes())
	}
}

// announceClass is the word of VIPState.Announce that names its style:
// "withdrawn: WHY" is styled as "withdrawn".
func announceClass(announce string) string {
	word, _, _ := strings.Cut(announce, ":")
	return word
}

// groupDigits writes n with thin spaces between groups of three digits.
func groupDigits(n uint64) string {
	s := strconv.FormatUint(n, 10)
	var b []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			b = append(b, "\u202f"...)
		}
		b = append(b, s[i])
	}
	return string(b)
}

// humanBytes is n in B, KiB, MiB, GiB or TiB, three significant digits.
func humanBytes(n uint64) string {
	const units = "KMGT"
	if n < 1024 {
		return strconv.FormatUint(n, 10) + " B"
	}
	f, u := float64(n)/1024, 0
	for f >= 1024 && u < len(units)-1 {
		f /= 1024
		u++
	}
	return strconv.FormatFloat(f, 'f', max(0, 2-digitsBefore(f)), 64) + " " + units[u:u+1] + "iB"
}

// digitsBefore is how many digits f >= 1 has before the point, less one.
func digitsBefore(f float64) int {
	d := 0
	for ; f >= 10; f /= 10 {
		d++
	}
	return d
}

// rate is a per-second rate to three significant digits, with k, M or G
// for thousands, millions, billions ("0", "12.5", "1.23k", "45.6M").
func rate(f float64) string {
	const units = " kMG"
	u := 0
	for f >= 999.5 && u < len(units)-1 {
		f /= 1000
		u++
	}
	if f < 0.005 {
		return "0"
	}
	s := strconv.FormatFloat(f, 'f', max(0, 2-digitsBefore(max(f, 1))), 64)
	return strings.TrimSpace(s + units[u:u+1])
}

// age is how long before now t was, to the second ("3m12s"), or "" for
// the zero time.
func age(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t).Round(time.Second)
	if d < 0 {
		return fmt.Sprintf("in %v", -d)
	}
	return d.String()
}

// Sparkline geometry: a point every sparkStep units, sparkH units tall.
const (
	sparkStep = 2
	sparkH    = 16
)

// spark draws vals as an inline SVG sparkline of class kind (no script,
// no fetch: the page's Content-Security-Policy holds). Values are scaled
// to the largest ("answered": to 0..1, and a point of -1, no handshakes,
// breaks the line); the title gives the last value and the largest.
func spark(vals []float64, kind string) template.HTML {
	top := 1.0
	if kind != "answered" {
		top = 0
		for _, v := range vals {
			top = max(top, v)
		}
	}
	var lines []string
	var cur []string
	flush := func() {
		if len(cur) == 1 { // a lone point: a dash, or it would not show
			x, y, _ := strings.Cut(cur[0], ",")
			n, _ := strconv.Atoi(x)
			cur = append(cur, strconv.Itoa(n+sparkStep-1)+","+y)
		}
		if len(cur) > 0 {
			lines, cur = append(lines, strings.Join(cur, " ")), nil
		}
	}
	low := false
	for i, v := range vals {
		if v < 0 {
			flush()
			continue
		}
		y := float64(sparkH - 1)
		if top > 0 {
			y = float64(sparkH-1) - v/top*float64(sparkH-2)
		}
		cur = append(cur, strconv.Itoa(i*sparkStep)+","+strconv.FormatFloat(y, 'f', 1, 64))
		if kind == "answered" && i >= len(vals)-2 && v < 0.1 {
			low = true // the last ten seconds under 10 %
		}
	}
	flush()
	class := "spark " + kind
	if low {
		class += " low"
	}
	last := "none"
	if n := len(vals); n > 0 && vals[n-1] >= 0 {
		last = strconv.FormatFloat(vals[n-1], 'g', 3, 64)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="%s" width="%d" height="%d" viewBox="0 0 %d %d" role="img"><title>%s: last %s, top %s</title>`,
		class, len(vals)*sparkStep, sparkH, len(vals)*sparkStep, sparkH, kind, last, strconv.FormatFloat(top, 'g', 3, 64))
	for _, l := range lines {
		fmt.Fprintf(&b, `<polyline points="%s"/>`, l)
	}
	b.WriteString("</svg>")
	return template.HTML(b.String())
}

// beHist is the history of backend addr:port of VIP vip in h (nil: none).
func beHist(h *api.Histories, vip, addr string, port uint16) *api.History {
	if h == nil {
		return nil
	}
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return nil
	}
	return h.Backends[vip+" "+api.BackendName{Addr: a, Port: port}.String()]
}
