package yardstick

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"os"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Figure is one plot of the HTML report, rendered as inline SVG.
type Figure struct {
	Title string
	SVG   template.HTML
}

// Figures renders the report's plots: the TTFW distribution (CDF) per
// target at each level, each request's TTFW over the run at each level
// (a warm-up or a stall shows there), TTFW and TTC against concurrency,
// and the chunk-gap distribution (CDF, log scale) per target at each
// level. Legends are drawn beside the plots, never on their lines.
func (r *Report) Figures() ([]Figure, error) {
	var figs []Figure
	add := func(title string, p *plot.Plot, err error) error {
		if err != nil {
			return err
		}
		if p == nil {
			return nil // nothing measured to plot
		}
		svg, err := renderSVG(p)
		if err != nil {
			return err
		}
		figs = append(figs, Figure{Title: title, SVG: template.HTML(svg)})
		return nil
	}
	for _, conc := range r.Load.Concurrency {
		title := fmt.Sprintf("Time to first word, CDF, concurrency %d", conc)
		p, err := r.cdf(title, "time to first word (ms)", conc, func(c *Cell) []float64 { return c.TTFWSamples }, false)
		if err := add(title, p, err); err != nil {
			return nil, err
		}
	}
	for _, conc := range r.Load.Concurrency {
		title := fmt.Sprintf("Time to first word over the run, concurrency %d", conc)
		p, err := r.overTime(title, conc)
		if err := add(title, p, err); err != nil {
			return nil, err
		}
	}
	for _, m := range []struct {
		what string
		get  func(*Cell) Dist
	}{{"time to first word", func(c *Cell) Dist { return c.TTFW }}, {"time to complete", func(c *Cell) Dist { return c.TTC }}} {
		title := "Latency against concurrency: " + m.what
		p, err := r.vsConcurrency(title, m.what+" (ms)", m.get)
		if err := add(title, p, err); err != nil {
			return nil, err
		}
	}
	for _, conc := range r.Load.Concurrency {
		title := fmt.Sprintf("Chunk gaps, CDF, concurrency %d", conc)
		p, err := r.cdf(title, "gap between text chunks (ms, log scale)", conc, func(c *Cell) []float64 { return c.GapSamples }, true)
		if err := add(title, p, err); err != nil {
			return nil, err
		}
	}
	return figs, nil
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Add(plotter.NewGrid())
	return p
}

// overTime plots, per target at level conc, each request's TTFW at the
// time it was sent, and a cross on the axis for each failed request.
func (r *Report) overTime(title string, conc int) (*plot.Plot, error) {
	p := newPlot(title, "seconds since the run started", "time to first word (ms)")
	drawn := false
	for i, t := range r.Targets {
		c := r.cellAt(t.Name, conc)
		if c == nil || len(c.TTFWOverTime)+len(c.FailedAt) == 0 {
			continue
		}
		if len(c.TTFWOverTime) > 0 {
			pts := make(plotter.XYs, len(c.TTFWOverTime))
			for k, tv := range c.TTFWOverTime {
				pts[k] = plotter.XY{X: tv[0], Y: tv[1]}
			}
			sc, err := plotter.NewScatter(pts)
			if err != nil {
				return nil, err
			}
			sc.Color, sc.Shape, sc.Radius = plotutil.Color(i), plotutil.Shape(i), vg.Points(2)
			p.Add(sc)
			p.Legend.Add(t.Name, sc)
		}
		if len(c.FailedAt) > 0 {
			pts := make(plotter.XYs, len(c.FailedAt))
			for k, at := range c.FailedAt {
				pts[k] = plotter.XY{X: at, Y: 0}
			}
			sc, err := plotter.NewScatter(pts)
			if err != nil {
				return nil, err
			}
			sc.Color, sc.Shape, sc.Radius = plotutil.Color(i), draw.CrossGlyph{}, vg.Points(3)
			p.Add(sc)
			p.Legend.Add(t.Name+" failed (sent at)", sc)
		}
		drawn = true
	}
	if !drawn {
		return nil, nil
	}
	p.Y.Min = 0
	return p, nil
}

// cdf plots, per target at level conc, the share of samples at or under
// each value.
func (r *Report) cdf(title, xlabel string, conc int, get func(*Cell) []float64, logX bool) (*plot.Plot, error) {
	p := newPlot(title, xlabel, "share of samples")
	var lines []any
	for i := range r.Cells {
		c := &r.Cells[i]
		xs := get(c)
		if c.Concurrency != conc || len(xs) == 0 {
			continue
		}
		pts := make(plotter.XYs, len(xs))
		for k, x := range xs {
			if logX {
				x = math.Max(x, 0.001)
			}
			pts[k] = plotter.XY{X: x, Y: float64(k+1) / float64(len(xs))}
		}
		lines = append(lines, c.Target, pts)
	}
	if len(lines) == 0 {
		return nil, nil
	}
	p.Y.Min, p.Y.Max = 0, 1
	if err := plotutil.AddLines(p, lines...); err != nil {
		return nil, err
	}
	if logX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		// A log axis needs a positive range: samples all alike would get
		// the padding of a point (min - 1), which a log scale refuses.
		lo, hi := math.Inf(1), math.Inf(-1)
		for i := 1; i < len(lines); i += 2 {
			for _, pt := range lines[i].(plotter.XYs) {
				lo, hi = math.Min(lo, pt.X), math.Max(hi, pt.X)
			}
		}
		if hi < lo*1.01 {
			lo, hi = lo/2, hi*2
		}
		p.X.Min, p.X.Max = lo, hi
	}
	return p, nil
}

// vsConcurrency plots p50 (solid) and p95 (dashed) of a measure against
// concurrency, one colour per target.
func (r *Report) vsConcurrency(title, ylabel string, get func(*Cell) Dist) (*plot.Plot, error) {
	p := newPlot(title, "concurrency", ylabel)
	drawn := false
	for i, t := range r.Targets {
		var p50, p95 plotter.XYs
		for k := range r.Cells {
			c := &r.Cells[k]
			if d := get(c); c.Target == t.Name && d.N > 0 {
				p50 = append(p50, plotter.XY{X: float64(c.Concurrency), Y: d.P50})
				p95 = append(p95, plotter.XY{X: float64(c.Concurrency), Y: d.P95})
			}
		}
		if len(p50) == 0 {
			continue
		}
		for _, s := range []struct {
			name string
			pts  plotter.XYs
			dash []vg.Length
		}{{t.Name + " p50", p50, nil}, {t.Name + " p95", p95, []vg.Length{vg.Points(4), vg.Points(3)}}} {
			l, pts, err := plotter.NewLinePoints(s.pts)
			if err != nil {
				return nil, err
			}
			l.Color, pts.Color = plotutil.Color(i), plotutil.Color(i)
			l.Dashes = s.dash
			pts.Shape = plotutil.Shape(i)
			p.Add(l, pts)
			p.Legend.Add(s.name, l, pts)
		}
		drawn = true
	}
	if !drawn {
		return nil, nil
	}
	return p, nil
}

// plotWidth and plotHeight are a figure's plot area; its legend is
// drawn to the right of it, outside, where it hides no line.
const plotWidth, plotHeight = 6 * vg.Inch, 3.6 * vg.Inch

// layout sizes a figure: the plot area, and its legend to the right.
func layout(p *plot.Plot) (w, h vg.Length, drawTo func(draw.Canvas)) {
	leg := p.Legend
	p.Legend = plot.NewLegend()
	leg.Top, leg.Left, leg.XOffs, leg.YOffs = true, true, 0, 0
	leg.Padding = vg.Points(3)
	pad := 4 * vg.Millimeter
	lw := leg.Rectangle(draw.Canvas{}).Size().X
	if lw > 0 {
		lw += 2 * pad
	}
	return plotWidth + lw, plotHeight, func(dc draw.Canvas) {
		p.Draw(draw.Crop(dc, 0, -lw, 0, 0))
		if lw > 0 {
			top := p.Title.TextStyle.Rectangle(p.Title.Text).Size().Y + p.Title.Padding + pad
			leg.Draw(draw.Crop(dc, plotWidth+pad, -pad, 0, -top))
		}
	}
}

func renderSVG(p *plot.Plot) (string, error) {
	w, h, drawTo := layout(p)
	c := vgsvg.New(w, h)
	drawTo(draw.New(c))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return "", err
	}
	s := b.String()
	if i := strings.Index(s, "<svg"); i > 0 {
		s = s[i:] // inline: no XML declaration or doctype
	}
	return s, nil
}

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"pct": func(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) },
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>firstword bench report</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:20px;color:#222}
table{border-collapse:collapse;font-size:12.5px;margin:8px 0 16px}
th,td{padding:3px 8px;border-bottom:1px solid #ddd;text-align:right;white-space:nowrap}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
td.fail{color:#b00;font-weight:bold}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(640px,1fr));gap:8px}
svg{width:100%;height:auto}
code{font-size:12px}
</style></head><body>
<h1>firstword bench</h1>
<p>{{.Report.Started.Format "2006-01-02 15:04:05 UTC"}} · {{printf "%.1f" .Report.Elapsed}} s{{if .Report.Truncated}} · <strong>cut by --max-time</strong>{{end}}{{if .Report.Interrupted}} · <strong>interrupted</strong>{{end}}{{with .Report.Host}} · machine {{pct .Busy}} busy, {{pct .Steal}} stolen by the hypervisor{{end}}</p>
{{range .HostNotes}}<p><strong>{{.}}</strong></p>{{end}}
{{if .Report.Command}}<p><code>{{.Report.Command}}</code></p>{{end}}
<table><tr><th>target</th><th>URL</th><th>surface</th><th>model</th><th>pid</th></tr>
{{range .Report.Targets}}<tr><td><b>{{.Name}}</b>{{if eq .Name $.Report.Baseline}} (baseline){{end}}</td><td>{{.URL}}</td><td>{{.Surface}}</td><td>{{.Model}}</td><td>{{if .PID}}{{.PID}}{{else}}-{{end}}</td></tr>{{end}}
</table>
<h2>Latency (ms)</h2>
<table id="cells"><tr>{{range .Columns}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td>{{if .Bold}}<b>{{.Text}}</b>{{else}}{{.Text}}{{end}}</td>{{end}}</tr>
{{end}}</table>
<p>peak: most requests in flight at once; p50 [95% CI] and the other intervals by bootstrap ({{.Report.Load.CI}}); gaps between text chunks; bunched: share of gaps under 1 ms in a run that began after a gap of at least {{.Report.Load.BunchAfterMs}} ms; req/s: successful requests per second; cpu/req and rss: the target's process, with --pid.</p>
{{with .Report.Checks}}<h2>Checks</h2>
<p>Judged on {{if eq .JudgedOn "interval"}}the whole 95% interval{{else}}the point estimate{{end}}: {{if .Pass}}all {{len .Results}} passed{{else}}{{.Failed}} of {{len .Results}} failed{{end}}.</p>
<table id="checks"><tr><th>verdict</th><th>check</th><th>detail</th></tr>
{{range .Results}}<tr><td{{if not .Pass}} class="fail"{{end}}>{{if .Pass}}pass{{else}}FAIL{{end}}</td><td><code>{{.Check}}</code></td><td style="text-align:left">{{.Detail}}</td></tr>
{{end}}</table>{{end}}
{{if .Faults}}<h2>Cancellation and upstream drops</h2>
<p>Through the fake upstream {{.Report.Upstream}}: time from the client's close to the upstream seeing its request closed; what the client saw when the upstream cut the stream.</p>
<table id="faults"><tr><th>target</th><th>cancel mid-stream</th><th>cancel before first token</th><th>upstream drop</th></tr>
{{range .Faults}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>{{end}}
</table>{{with .Grace}}<p>{{.}}</p>{{end}}{{end}}
<h2>Plots</h2>
<div class="grid">
{{range .Figures}}<figure title="{{.Title}}">{{.SVG}}</figure>
{{end}}</div>
</body></html>
`))

// htmlCell is one cell of the HTML table.
type htmlCell struct {
	Text string
	Bold bool
}

// WriteHTML writes the report as one self-contained HTML file: the table
// and the plots as inline SVG, nothing loaded from elsewhere.
func (r *Report) WriteHTML(path string) error {
	figs, err := r.Figures()
	if err != nil {
		return err
	}
	data := struct {
		Report    *Report
		Figures   []Figure
		HostNotes []string
		Columns   []string
		Rows      [][]htmlCell
		Faults    [][]string
		Grace     string
	}{Report: r, Figures: figs, HostNotes: HostNotes(r.Host)}
	for _, col := range columns {
		data.Columns = append(data.Columns, col.head)
	}
	for i := range r.Cells {
		var row []htmlCell
		for _, col := range columns {
			row = append(row, htmlCell{col.get(r, &r.Cells[i]), col.bold})
		}
		data.Rows = append(data.Rows, row)
	}
	for _, f := range r.Faults {
		data.Faults = append(data.Faults, []string{f.Target, r.cancelText(f.Target, f.CancelMid), r.cancelText(f.Target, f.CancelBefore), f.Drop.String()})
	}
	if r.graceWindow() {
		data.Grace = graceNote
	}
	var b bytes.Buffer
	if err := page.Execute(&b, data); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
