package bench

import (
	"fmt"
	"html"
	"io"
	"math"
)

// Chart geometry, in SVG user units.
const (
	chartWidth  = 960
	labelWidth  = 330
	valueWidth  = 150
	rowHeight   = 26
	barHeight   = 14
	chartTop    = 56
	chartBottom = 44
)

var kindColor = map[string]string{
	KindCeiling:   "#7f7f7f",
	KindKernel:    "#d62728",
	KindForwarder: "#9467bd",
	KindVIPD:      "#1f77b4",
}

// WriteSVG draws the rig results as a horizontal bar chart: one row per
// scenario, the bar at the median forwarded rate, a whisker from the
// minimum to the maximum, and a pale bar behind it up to the offered rate.
func (r *Report) WriteSVG(w io.Writer, title string) error {
	rows := make([]*RigResult, 0, len(r.Rig))
	top := 0.0
	for i := range r.Rig {
		x := &r.Rig[i]
		rows = append(rows, x)
		if x.Err == "" {
			top = math.Max(top, math.Max(x.Forwarded.Max, x.Offered.Max))
		}
	}
	scaleMax := niceCeil(top)
	plotW := float64(chartWidth - labelWidth - valueWidth)
	px := func(v float64) float64 { return labelWidth + plotW*v/scaleMax }
	height := chartTop + rowHeight*len(rows) + chartBottom
	p := &svgPrinter{w: w}
	p.f(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", chartWidth, height, chartWidth, height)
	p.f(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	p.f(`<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", 10, html.EscapeString(title))
	p.f(`<text x="%d" y="40" fill="#555">bar: median forwarded Mpps (min–max whisker); pale bar: offered by the generator</text>`+"\n", 10)
	// Grid and axis labels.
	const ticks = 5
	for i := 0; i <= ticks; i++ {
		v := scaleMax * float64(i) / ticks
		x := px(v)
		p.f(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", x, chartTop-4, x, chartTop+rowHeight*len(rows))
		p.f(`<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%.2f</text>`+"\n", x, chartTop+rowHeight*len(rows)+16, v/1e6)
	}
	p.f(`<text x="%.1f" y="%d" text-anchor="middle" fill="#555">million packets per second (64-byte UDP)</text>`+"\n", labelWidth+plotW/2, height-8)
	for i, x := range rows {
		y := float64(chartTop + rowHeight*i)
		mid := y + rowHeight/2.0
		p.f(`<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", labelWidth-8, mid, html.EscapeString(x.Name))
		if x.Err != "" {
			p.f(`<text x="%d" y="%.1f" dominant-baseline="middle" fill="#d62728">failed</text>`+"\n", labelWidth+4, mid)
			continue
		}
		color := kindColor[x.Kind]
		if color == "" {
			color = "#333"
		}
		by := mid - barHeight/2.0
		if x.Offered.N > 0 {
			p.f(`<rect x="%d" y="%.1f" width="%.1f" height="%d" fill="%s" opacity="0.2"/>`+"\n", labelWidth, by, px(x.Offered.Median)-labelWidth, barHeight, color)
		}
		p.f(`<rect x="%d" y="%.1f" width="%.1f" height="%d" fill="%s"/>`+"\n", labelWidth, by, px(x.Forwarded.Median)-labelWidth, barHeight, color)
		x0, x1 := px(x.Forwarded.Min), px(x.Forwarded.Max)
		p.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x0, mid, x1, mid)
		for _, xx := range []float64{x0, x1} {
			p.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", xx, mid-4, xx, mid+4)
		}
		p.f(`<text x="%d" y="%.1f" dominant-baseline="middle">%s</text>`+"\n", chartWidth-valueWidth+8, mid, Mpps(x.Forwarded.Median)+" Mpps")
	}
	p.f("</svg>\n")
	return p.err
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (at least 1e5).
func niceCeil(v float64) float64 {
	if v <= 1e5 {
		return 1e5
	}
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if v <= m*e {
			return m * e
		}
	}
	return 10 * e
}

type svgPrinter struct {
	w   io.Writer
	err error
}

func (p *svgPrinter) f(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}
