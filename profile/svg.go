package profile

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// Geometry of the SVG timeline, in pixels.
const (
	svgWidth     = 1200
	svgLabel     = 150 // left column with the lane names
	svgRight     = 20
	svgTop       = 50 // title and time axis
	svgLane      = 14
	svgGap       = 4
	svgCounter   = 36
	svgLegendRow = 18
)

// palette colours stages in order of first activity; colour-blind-safe (Okabe-Ito), then greys.
var palette = []string{"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#999999", "#555555"}

// WriteSVG draws tl as a timeline picture: a time axis, one lane per span track (in tl.Tracks
// order) with a rectangle per span (a tick for an instant) coloured by stage and titled with its
// name and duration, one step chart per counter track, and a legend of the stages' colours.
func WriteSVG(w io.Writer, tl Timeline) error {
	bw := bufio.NewWriter(w)
	plot := float64(svgWidth - svgLabel - svgRight)
	end := tl.End
	if end <= 0 {
		end = time.Millisecond
	}
	x := func(d time.Duration) float64 { return svgLabel + plot*float64(d)/float64(end) }

	colour := map[string]string{}
	var stages []string
	for _, s := range tl.Spans {
		if _, ok := colour[s.Stage]; !ok {
			colour[s.Stage] = palette[min(len(stages), len(palette)-1)]
			stages = append(stages, s.Stage)
		}
	}
	laneY := map[string]float64{}
	y := float64(svgTop)
	for _, t := range tl.Tracks {
		laneY[t] = y
		y += svgLane + svgGap
	}
	counterY := map[string]float64{}
	for _, c := range tl.Counters {
		counterY[c] = y
		y += svgCounter + svgGap
	}
	legendY := y + 10
	height := legendY + svgLegendRow*float64((len(stages)+5)/6) + 10

	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%.0f" viewBox="0 0 %d %.0f" font-family="sans-serif" font-size="11">`+"\n",
		svgWidth, height, svgWidth, height)
	fmt.Fprintf(bw, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(bw, `<text x="8" y="16" font-size="13" font-weight="bold">stoke profile: %s, %d spans`, fmtDur(tl.End), len(tl.Spans))
	if tl.Dropped > 0 {
		fmt.Fprintf(bw, ", %d events dropped", tl.Dropped)
	}
	fmt.Fprint(bw, "</text>\n")

	// Time axis with about ten round ticks.
	step := niceStep(end / 10)
	fmt.Fprintf(bw, `<g stroke="#ccc">`+"\n")
	for t := time.Duration(0); t <= end; t += step {
		fmt.Fprintf(bw, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.0f"/>`+"\n", x(t), svgTop-14, x(t), legendY-8)
	}
	fmt.Fprint(bw, "</g>\n<g fill=\"#333\" text-anchor=\"middle\">\n")
	for t := time.Duration(0); t <= end; t += step {
		fmt.Fprintf(bw, `<text x="%.1f" y="%d">%s</text>`+"\n", x(t), svgTop-18, fmtDur(t))
	}
	fmt.Fprint(bw, "</g>\n")

	// Lane names.
	fmt.Fprint(bw, "<g fill=\"#222\">\n")
	for _, t := range tl.Tracks {
		fmt.Fprintf(bw, `<text x="8" y="%.1f">%s</text>`+"\n", laneY[t]+svgLane-3, esc(t))
	}
	for _, c := range tl.Counters {
		fmt.Fprintf(bw, `<text x="8" y="%.1f">%s</text>`+"\n", counterY[c]+svgCounter/2+4, esc(c))
	}
	fmt.Fprint(bw, "</g>\n")

	// Spans.
	for _, s := range tl.Spans {
		x0, x1 := x(s.Start), x(s.End)
		w := max(x1-x0, 0.6) // a span shorter than a pixel still shows
		fmt.Fprintf(bw, `<rect x="%.2f" y="%.1f" width="%.2f" height="%d" fill="%s"><title>%s: %s (%s at %s)</title></rect>`+"\n",
			x0, laneY[s.Track], w, svgLane, colour[s.Stage], esc(s.Track), esc(s.Name), fmtDur(s.End-s.Start), fmtDur(s.Start))
	}

	// Counters as step charts scaled to each one's maximum.
	for _, c := range tl.Counters {
		peak := 0.0
		for _, p := range tl.Points {
			if p.Track == c {
				peak = max(peak, p.Value)
			}
		}
		base := counterY[c] + svgCounter
		scale := 0.0
		if peak > 0 {
			scale = (svgCounter - 4) / peak
		}
		var pts strings.Builder
		fmt.Fprintf(&pts, "%.1f,%.1f", x(0), base)
		lastY := base
		for _, p := range tl.Points {
			if p.Track != c {
				continue
			}
			px, py := x(p.At), base-p.Value*scale
			fmt.Fprintf(&pts, " %.1f,%.1f %.1f,%.1f", px, lastY, px, py)
			lastY = py
		}
		fmt.Fprintf(bw, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", svgLabel, base, svgWidth-svgRight, base)
		fmt.Fprintf(bw, `<polyline fill="none" stroke="#444" stroke-width="1" points="%s"><title>%s (peak %.3g)</title></polyline>`+"\n", pts.String(), esc(c),
			peak)
		fmt.Fprintf(bw, `<text x="%d" y="%.1f" fill="#666" text-anchor="end">%.3g</text>`+"\n", svgWidth-svgRight, counterY[c]+10, peak)
	}

	// Legend.
	for i, st := range stages {
		lx := 8 + float64(i%6)*195
		ly := legendY + svgLegendRow*float64(i/6)
		fmt.Fprintf(bw, `<rect x="%.0f" y="%.0f" width="12" height="12" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`+"\n", lx, ly, colour[st], lx+16, ly+10,
			esc(st))
	}
	fmt.Fprint(bw, "</svg>\n")
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("profile: write svg: %w", err)
	}
	return nil
}

// niceStep rounds d up to 1, 2 or 5 times a power of ten (at least a microsecond).
func niceStep(d time.Duration) time.Duration {
	if d < time.Microsecond {
		return time.Microsecond
	}
	p := math.Pow(10, math.Floor(math.Log10(float64(d))))
	for _, m := range []float64{1, 2, 5, 10} {
		if float64(d) <= m*p {
			return time.Duration(m * p)
		}
	}
	return time.Duration(10 * p)
}

func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d >= time.Second:
		return fmt.Sprintf("%.3gs", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.3gms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.3gµs", float64(d)/1e3)
	}
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
