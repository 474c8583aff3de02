package main

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// A small SVG chart writer: line charts on linear or logarithmic axes, and
// grouped bar charts. Enough for the benchmark page; no dependency.

const (
	svgW, svgH                      = 840, 460
	padL, padR, padT, padB          = 78, 250, 44, 88
	plotW, plotH                    = svgW - padL - padR, svgH - padT - padB
	fontFamily                      = "DejaVu Sans, Helvetica, Arial, sans-serif"
	axisColor, gridColor, textColor = "#444", "#e3e3e3", "#222"
)

var palette = map[string]string{
	"floor":                            "#7f7f7f",
	"PING":                             "#b0b0b0",
	"rlock":                            "#1f5fbf",
	"rlock (1 client)":                 "#7fa8e8",
	"rlock-poll":                       "#8c4fbf",
	"rlock-spin":                       "#5f3f8f",
	"rlock-fair":                       "#8f3f5f",
	"rlock-rw":                         "#3f8fbf",
	"rlock RedLock":                    "#1f5fbf",
	"redsync":                          "#d62728",
	"redsync RedLock":                  "#d62728",
	"redislock":                        "#ff7f0e",
	"rueidislock":                      "#2ca02c",
	"rueidislock (1 client)":           "#98df8a",
	"rueidislock (NoLoopTracking off)": "#8a6d3b",
	"floor (go-redis)":                 "#c0a080",
}

func colorOf(name string) string {
	if c, ok := palette[name]; ok {
		return c
	}
	return "#333"
}

// axis maps data values to pixels.
type axis struct {
	log      bool
	min, max float64
	ticks    []tick // custom ticks; nil: automatic
	label    string
}

type tick struct {
	v     float64
	label string
}

func (a axis) frac(v float64) float64 {
	if a.log {
		return (math.Log10(v) - math.Log10(a.min)) / (math.Log10(a.max) - math.Log10(a.min))
	}
	return (v - a.min) / (a.max - a.min)
}

// fit widens the axis to nice bounds around the data range [lo, hi].
func (a *axis) fit(lo, hi float64) {
	if a.log {
		lo = math.Max(lo, 1e-9)
		a.min = math.Pow(10, math.Floor(math.Log10(lo)))
		a.max = math.Pow(10, math.Ceil(math.Log10(hi)))
		if a.max <= a.min {
			a.max = a.min * 10
		}
		return
	}
	if hi <= lo {
		hi = lo + 1
	}
	step := niceStep((hi - lo) / 5)
	a.min = math.Floor(lo/step) * step
	a.max = math.Ceil(hi/step) * step
}

func niceStep(raw float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func (a axis) autoTicks() []tick {
	if a.ticks != nil {
		return a.ticks
	}
	var ts []tick
	if a.log {
		for d := a.min; d <= a.max*1.0001; d *= 10 {
			for _, m := range []float64{1, 2, 5} {
				v := d * m
				if v <= a.max*1.0001 && v >= a.min*0.9999 {
					ts = append(ts, tick{v, fmtNum(v)})
				}
			}
		}
		return ts
	}
	step := niceStep((a.max - a.min) / 5)
	for v := a.min; v <= a.max+step/1000; v += step {
		ts = append(ts, tick{v, fmtNum(v)})
	}
	return ts
}

func fmtNum(v float64) string {
	switch av := math.Abs(v); {
	case av == 0:
		return "0"
	case av >= 1e6:
		return trimZeros(fmt.Sprintf("%.1f", v/1e6)) + "M"
	case av >= 1e4:
		return trimZeros(fmt.Sprintf("%.1f", v/1e3)) + "k"
	case av >= 100:
		return fmt.Sprintf("%.0f", v)
	case av >= 1:
		return trimZeros(fmt.Sprintf("%.1f", v))
	default:
		return trimZeros(fmt.Sprintf("%.3f", v))
	}
}

func trimZeros(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// series is one line of a line chart.
type series struct {
	name   string
	xs, ys []float64
	dashed bool
	marks  bool // draw a dot at each point
	color  string
}

type lineChart struct {
	title string
	x, y  axis
	lines []series
	note  string // small text under the plot
}

type svgDoc struct{ b strings.Builder }

func (d *svgDoc) f(format string, args ...any) { fmt.Fprintf(&d.b, format, args...) }

func (d *svgDoc) open(title string) {
	d.f(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="%s" font-size="12">`+"\n", svgW, svgH, svgW, svgH, fontFamily)
	d.f(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	d.f(`<text x="%d" y="24" font-size="15" font-weight="bold" fill="%s">%s</text>`+"\n", padL, textColor, html.EscapeString(title))
}

func (d *svgDoc) close(note string) {
	for i, line := range wrap(note, 130) {
		d.f(`<text x="%d" y="%d" font-size="10.5" fill="#666">%s</text>`+"\n", padL, padT+plotH+60+14*i, html.EscapeString(line))
	}
	d.f("</svg>\n")
}

// wrap splits s into lines of at most n characters, at spaces.
func wrap(s string, n int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len([]rune(line))+1+len([]rune(w)) > n {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// frame draws the plot box, grid and tick labels of both axes.
func (d *svgDoc) frame(x, y axis) {
	for _, t := range y.autoTicks() {
		py := float64(padT) + (1-y.frac(t.v))*plotH
		d.f(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", padL, py, padL+plotW, py, gridColor)
		d.f(`<text x="%d" y="%.1f" text-anchor="end" fill="%s">%s</text>`+"\n", padL-6, py+4, textColor, html.EscapeString(t.label))
	}
	for _, t := range x.autoTicks() {
		px := float64(padL) + x.frac(t.v)*plotW
		d.f(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", px, padT, px, padT+plotH, gridColor)
		d.f(`<text x="%.1f" y="%d" text-anchor="middle" fill="%s">%s</text>`+"\n", px, padT+plotH+16, textColor, html.EscapeString(t.label))
	}
	d.f(`<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="%s"/>`+"\n", padL, padT, plotW, plotH, axisColor)
	d.f(`<text x="%d" y="%d" text-anchor="middle" fill="%s">%s</text>`+"\n", padL+plotW/2, padT+plotH+38, textColor, html.EscapeString(x.label))
	d.f(`<text transform="translate(18 %d) rotate(-90)" text-anchor="middle" fill="%s">%s</text>`+"\n", padT+plotH/2, textColor, html.EscapeString(y.label))
}

func (d *svgDoc) legend(names []string, colors []string, dashed []bool) {
	x := padL + plotW + 14
	for i, n := range names {
		y := padT + 10 + i*20
		dash := ""
		if dashed != nil && dashed[i] {
			dash = ` stroke-dasharray="6 4"`
		}
		d.f(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2.5"%s/>`+"\n", x, y, x+24, y, colors[i], dash)
		d.f(`<text x="%d" y="%d" fill="%s">%s</text>`+"\n", x+30, y+4, textColor, html.EscapeString(n))
	}
}

func (c lineChart) svg() string {
	var d svgDoc
	d.open(c.title)
	if c.x.max == 0 || c.y.max == 0 {
		xl, xh, yl, yh := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
		for _, s := range c.lines {
			for i := range s.xs {
				xl, xh = math.Min(xl, s.xs[i]), math.Max(xh, s.xs[i])
				yl, yh = math.Min(yl, s.ys[i]), math.Max(yh, s.ys[i])
			}
		}
		if c.x.max == 0 {
			c.x.fit(xl, xh)
		}
		if c.y.max == 0 {
			if !c.y.log {
				yl = math.Min(yl, 0)
			}
			c.y.fit(yl, yh)
		}
	}
	d.frame(c.x, c.y)
	var names, colors []string
	var dashed []bool
	d.f(`<g clip-path="none">` + "\n")
	for _, s := range c.lines {
		col := s.color
		if col == "" {
			col = colorOf(s.name)
		}
		var pts []string
		for i := range s.xs {
			px := float64(padL) + c.x.frac(s.xs[i])*plotW
			py := float64(padT) + (1-c.y.frac(s.ys[i]))*plotH
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px, py))
			if s.marks {
				d.f(`<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>`+"\n", px, py, col)
			}
		}
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		d.f(`<polyline fill="none" stroke="%s" stroke-width="2" stroke-linejoin="round"%s points="%s"/>`+"\n", col, dash, strings.Join(pts, " "))
		names, colors, dashed = append(names, s.name), append(colors, col), append(dashed, s.dashed)
	}
	d.f("</g>\n")
	d.legend(names, colors, dashed)
	d.close(c.note)
	return d.b.String()
}

// barChart is grouped bars: one group per category, one bar per series.
type barChart struct {
	title      string
	categories []string    // x groups
	names      []string    // bars within a group (legend)
	values     [][]float64 // values[series][category]; NaN: no bar
	y          axis
	refs       []ref // horizontal reference lines
	note       string
}

type ref struct {
	v     float64
	label string
}

func (c barChart) svg() string {
	var d svgDoc
	d.open(c.title)
	hi := 0.0
	for _, vs := range c.values {
		for _, v := range vs {
			if !math.IsNaN(v) {
				hi = math.Max(hi, v)
			}
		}
	}
	for _, r := range c.refs {
		hi = math.Max(hi, r.v)
	}
	if c.y.max == 0 {
		c.y.fit(0, hi*1.05)
	}
	d.frame(axis{min: 0, max: 1, ticks: []tick{}, label: ""}, c.y)
	groupW := float64(plotW) / float64(len(c.categories))
	barW := groupW * 0.8 / float64(len(c.names))
	for ci, cat := range c.categories {
		gx := float64(padL) + groupW*float64(ci) + groupW*0.1
		for si, name := range c.names {
			v := c.values[si][ci]
			if math.IsNaN(v) {
				continue
			}
			top := float64(padT) + (1-c.y.frac(v))*plotH
			d.f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %s</title></rect>`+"\n",
				gx+barW*float64(si), top, barW-2, float64(padT+plotH)-top, colorOf(name), html.EscapeString(name), fmtNum(v))
			d.f(`<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10" fill="%s">%s</text>`+"\n", gx+barW*float64(si)+barW/2-1, top-4, textColor, fmtNum(v))
		}
		d.f(`<text x="%.1f" y="%d" text-anchor="middle" fill="%s">%s</text>`+"\n", gx+groupW*0.4, padT+plotH+16, textColor, html.EscapeString(cat))
	}
	for _, r := range c.refs {
		py := float64(padT) + (1-c.y.frac(r.v))*plotH
		d.f(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#000" stroke-width="1.5" stroke-dasharray="6 4"/>`+"\n", padL, py, padL+plotW, py)
		d.f(`<text x="%d" y="%.1f" text-anchor="end" font-size="10.5" fill="#000">%s</text>`+"\n", padL+plotW-4, py-5, html.EscapeString(r.label))
	}
	colors := make([]string, len(c.names))
	for i, n := range c.names {
		colors[i] = colorOf(n)
	}
	d.legend(c.names, colors, nil)
	d.close(c.note)
	return d.b.String()
}

// percentileXs are the x positions of an HDR-style percentile plot:
// 1/(1-q) on a log axis spreads the tail (90%, 99%, 99.9%) evenly.
var percentileTicks = []tick{{1, "0%"}, {2, "50%"}, {10, "90%"}, {100, "99%"}, {1000, "99.9%"}, {10000, "99.99%"}}

// percentileSeries turns sorted samples into the points of a percentile
// plot, value = f(sample).
func percentileSeries(name string, sorted []float64, dashed bool) series {
	s := series{name: name, dashed: dashed}
	n := len(sorted)
	if n == 0 {
		return s
	}
	maxX := float64(n) // the last sample sits at 1/(1-q) = n
	for k := 0; ; k++ {
		x := math.Pow(10, float64(k)/60) // 60 points per decade
		if x > maxX {
			break
		}
		q := 1 - 1/x
		i := min(int(math.Ceil(q*float64(n)))-1, n-1)
		s.xs = append(s.xs, x)
		s.ys = append(s.ys, sorted[max(i, 0)])
	}
	s.xs = append(s.xs, maxX)
	s.ys = append(s.ys, sorted[n-1])
	return s
}
