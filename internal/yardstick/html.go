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
// target at each level, TTFW and TTC against concurrency, and the
// chunk-gap distribution (CDF, log scale) per target at each level.
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
	p.Legend.Top = false
	p.Legend.Left = false
	p.Legend.XOffs = -4 * vg.Millimeter
	p.Legend.YOffs = 4 * vg.Millimeter
	return p
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
	if logX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.Y.Min, p.Y.Max = 0, 1
	return p, plotutil.AddLines(p, lines...)
}

// vsConcurrency plots p50 (solid) and p95 (dashed) of a measure against
// concurrency, one colour per target.
func (r *Report) vsConcurrency(title, ylabel string, get func(*Cell) Dist) (*plot.Plot, error) {
	p := newPlot(title, "concurrency", ylabel)
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = 4*vg.Millimeter, -2*vg.Millimeter
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

func renderSVG(p *plot.Plot) (string, error) {
	c := vgsvg.New(6*vg.Inch, 3.6*vg.Inch)
	p.Draw(draw.New(c))
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
	"ms":     func(v float64, n int) string { return f1(v, n) },
	"pct":    func(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) },
	"errors": errorList,
	"vs": func(c Cell) string {
		if c.AddedTTFWP50 == nil {
			return ""
		}
		return fmt.Sprintf("%+.2f ms ×%.2f", *c.AddedTTFWP50, *c.TTFWRatio)
	},
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>firstword bench report</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:20px;color:#222}
table{border-collapse:collapse;font-size:12.5px;margin:8px 0 16px}
th,td{padding:3px 8px;border-bottom:1px solid #ddd;text-align:right;white-space:nowrap}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(540px,1fr));gap:8px}
svg{width:100%;height:auto}
code{font-size:12px}
</style></head><body>
<h1>firstword bench</h1>
<p>{{.Report.Started.Format "2006-01-02 15:04:05 UTC"}} · {{printf "%.1f" .Report.Elapsed}} s{{if .Report.Truncated}} · <strong>cut by --max-time</strong>{{end}}{{with .Report.Host}} · machine {{pct .Busy}} busy, {{pct .Steal}} stolen by the hypervisor{{end}}</p>
{{with .Report.Host}}{{with .Note}}<p><strong>{{.}}</strong></p>{{end}}{{end}}
{{if .Report.Command}}<p><code>{{.Report.Command}}</code></p>{{end}}
<table><tr><th>target</th><th>URL</th><th>surface</th><th>model</th></tr>
{{range .Report.Targets}}<tr><td><b>{{.Name}}</b>{{if eq .Name $.Report.Baseline}} (baseline){{end}}</td><td>{{.URL}}</td><td>{{.Surface}}</td><td>{{.Model}}</td></tr>{{end}}
</table>
<h2>Latency (ms)</h2>
<table><tr><th>target</th><th>conc</th><th>ok/n</th><th>TTFB p50</th><th>TTFW p50</th><th>95% CI</th><th>TTFW p95</th><th>TTFW p99</th><th>TTC p50</th><th>TTC p95</th><th>gap p50</th><th>gap p99</th><th>bunched</th><th>tok/s</th><th>TTFW vs baseline</th><th>errors</th></tr>
{{range .Report.Cells}}<tr><td>{{.Target}}</td><td>{{.Concurrency}}</td><td>{{.OK}}/{{.Requests}}</td><td>{{ms .TTFB.P50 .TTFB.N}}</td><td><b>{{ms .TTFW.P50 .TTFW.N}}</b></td><td>{{ms (index .TTFW.CI50 0) .TTFW.N}}–{{ms (index .TTFW.CI50 1) .TTFW.N}}</td><td>{{ms .TTFW.P95 .TTFW.N}}</td><td>{{ms .TTFW.P99 .TTFW.N}}</td><td><b>{{ms .TTC.P50 .TTC.N}}</b></td><td>{{ms .TTC.P95 .TTC.N}}</td><td>{{ms .GapP50 .Gaps}}</td><td>{{ms .GapP99 .Gaps}}</td><td>{{pct .BunchedShare}}</td><td>{{ms .TokensPerSec.P50 .TokensPerSec.N}}</td><td>{{vs .}}</td><td>{{errors .Errors}}</td></tr>
{{end}}</table>
{{if .Report.Faults}}<h2>Cancellation and upstream drops</h2>
<p>Through the fake upstream {{.Report.Upstream}}: time from the client's close to the upstream seeing its request closed; what the client saw when the upstream cut the stream.</p>
<table><tr><th>target</th><th>cancel mid-stream</th><th>cancel before first token</th><th>upstream drop</th></tr>
{{range .Report.Faults}}<tr><td>{{.Target}}</td><td>{{.CancelMid}}</td><td>{{.CancelBefore}}</td><td>{{.Drop}}</td></tr>{{end}}
</table>{{end}}
<h2>Plots</h2>
<div class="grid">
{{range .Figures}}<figure title="{{.Title}}">{{.SVG}}</figure>
{{end}}</div>
<p>Confidence intervals: {{.Report.Load.CI}}. Bunched: share of gaps under 1 ms in a run that began after a gap of at least {{.Report.Load.BunchAfterMs}} ms.</p>
</body></html>
`))

// WriteHTML writes the report as one self-contained HTML file: the table
// and the plots as inline SVG, nothing loaded from elsewhere.
func (r *Report) WriteHTML(path string) error {
	figs, err := r.Figures()
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := page.Execute(&b, struct {
		Report  *Report
		Figures []Figure
	}{r, figs}); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
