package main

import (
	"fmt"
	"io"
	"strings"
)

// render writes the results as a Markdown table under the parameters.
func render(w io.Writer, p params, rs []result) {
	fmt.Fprintf(w, "seed=%d rate=%.0f/s duration=%s capacities=%v durations=Pareto(xm=%gs, alpha=%g, max %gs) target=%.0f%%\n",
		p.seed, p.rate, p.duration, p.capacities, p.xm, p.alpha, p.maxDur, 100*p.target)
	fmt.Fprintf(w, "events: backend %d (capacity %d) slows %gx at %s; a backend of capacity %d joins at %s; backend %d (capacity %d) leaves at %s\n\n",
		p.slowIdx, p.capacities[p.slowIdx], p.slowFactor, p.slowAt, p.addCap, p.addAt, p.removeIdx, p.capacities[p.removeIdx], p.removeAt)
	hdr := []string{"scheduler", "max/mean load", "slowed backend: utilization", "slowed backend: time overloaded", "flows moved: add", "flows moved: remove", "boxes agree"}
	fmt.Fprintf(w, "| %s |\n", strings.Join(hdr, " | "))
	fmt.Fprintf(w, "|%s\n", strings.Repeat(" ---: |", len(hdr)))
	for _, r := range rs {
		fmt.Fprintf(w, "| %s | %.2f | %.2f | %.1f%% | %.1f%% | %.1f%% | %.1f%% |\n",
			r.sched, r.imbalance, r.slowMean, 100*r.overloaded, 100*r.movedAdd, 100*r.movedRemove, 100*r.agree)
	}
}

// chart writes an SVG of the slowed backend's utilization over time, one
// line per scheduler, with the overload line at 1.
func chart(w io.Writer, p params, rs []result) {
	const W, H, left, right, top, bottom = 760, 360, 50, 130, 30, 40
	colors := []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"}
	ymax := 1.5
	for _, r := range rs {
		for _, u := range r.slowUtil {
			if u > ymax {
				ymax = u
			}
		}
	}
	ymax = float64(int(ymax*2)+1) / 2
	tmax := p.duration.Seconds()
	x := func(t float64) float64 { return left + (W-left-right)*t/tmax }
	y := func(u float64) float64 { return top + (H-top-bottom)*(1-u/ymax) }
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", W, H)
	fmt.Fprintf(w, `<rect width="%d" height="%d" fill="white"/>`+"\n", W, H)
	fmt.Fprintf(w, `<text x="%d" y="18" font-size="13">Slowed backend's utilization (active flows / its capacity share), both boxes</text>`+"\n", left)
	for u := 0.0; u <= ymax+1e-9; u += 0.5 {
		fmt.Fprintf(w, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%.1f</text>`+"\n",
			left, W-right, y(u), y(u), left-4, y(u)+4, u)
	}
	fmt.Fprintf(w, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="black" stroke-dasharray="4 3"/>`+"\n", left, W-right, y(1), y(1))
	for t := 0.0; t <= tmax; t += 20 {
		fmt.Fprintf(w, `<text x="%.1f" y="%d" text-anchor="middle">%.0fs</text>`+"\n", x(t), H-bottom+14, t)
	}
	for _, ev := range []struct {
		at    float64
		label string
	}{{p.slowAt.Seconds(), "slows"}, {p.addAt.Seconds(), "add"}, {p.removeAt.Seconds(), "remove"}} {
		fmt.Fprintf(w, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#999"/><text x="%.1f" y="%d">%s</text>`+"\n",
			x(ev.at), x(ev.at), top, H-bottom, x(ev.at)+3, top+10, ev.label)
	}
	for i, r := range rs {
		var pts strings.Builder
		for k, t := range r.slowUtilTimes {
			fmt.Fprintf(&pts, "%.1f,%.1f ", x(t), y(min(r.slowUtil[k], ymax)))
		}
		c := colors[i%len(colors)]
		fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="1.2" points="%s"/>`+"\n", c, strings.TrimSpace(pts.String()))
		fmt.Fprintf(w, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="3"/><text x="%d" y="%d">%s</text>`+"\n",
			W-right+10, W-right+30, top+20+18*i, top+20+18*i, c, W-right+35, top+24+18*i, r.sched)
	}
	fmt.Fprintln(w, "</svg>")
}
