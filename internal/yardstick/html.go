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
	p.Legend.Top = true
	p.Legend.Left = false
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

// vsConcurrency plots p50 and p95 of a measure against concurrency, per
// target.
func (r *Report) vsConcurrency(title, ylabel string, get func(*Cell) Dist) (*plot.Plot, error) {
	p := newPlot(title, "concurrency", ylabel)
	var lines []any
	for _, t := range r.Targets {
		var p50, p95 plotter.XYs
		for i := range r.Cells {
			c := &r.Cells[i]
			if d := get(c); c.Target == t.Name && d.N > 0 {
				p50 = append(p50, plotter.XY{X: float64(c.Concurrency), Y: d.P50})
				p95 = append(p95, plotter.XY{X: float64(c.Concurrency), Y: d.P95})
			}
		}
		if len(p50) > 0 {
			lines = append(lines, t.Name+" p50", p50, t.Name+" p95", p95)
		}
	}
	if len(lines) == 0 {
		return nil, nil
	}
	return p, plotutil.AddLinePoints(p, lines...)
}

func renderSVG(p *plot.Plot) (string, error) {
	c := vgsvg.New(7*vg.Inch, 4*vg.Inch)
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

var page = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>firstword bench report</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#222;max-width:1180px}
pre{font:12px/1.35 ui-monospace,monospace;background:#f6f6f6;padding:12px;overflow-x:auto}
figure{margin:18px 0}figcaption{font-weight:600;margin-bottom:4px}
svg{max-width:100%;height:auto}
</style></head><body>
<h1>firstword bench</h1>
<p>{{.Report.Started.Format "2006-01-02 15:04:05 UTC"}} · {{printf "%.1f" .Report.Elapsed}} s{{if .Report.Command}} · <code>{{.Report.Command}}</code>{{end}}{{if .Report.Truncated}} · <strong>cut by --max-time</strong>{{end}}</p>
<ul>{{range .Report.Targets}}<li><b>{{.Name}}</b>: {{.URL}} ({{.Surface}}, model {{.Model}})</li>{{end}}</ul>
<h2>Summary</h2>
<pre>{{.Table}}</pre>
{{range .Figures}}<figure><figcaption>{{.Title}}</figcaption>{{.SVG}}</figure>
{{end}}
<p>Confidence intervals: {{.Report.Load.CI}}.</p>
</body></html>
`))

// WriteHTML writes the report as one self-contained HTML file: the table
// and the plots as inline SVG, nothing loaded from elsewhere.
func (r *Report) WriteHTML(path string) error {
	figs, err := r.Figures()
	if err != nil {
		return err
	}
	var table bytes.Buffer
	r.WriteTable(&table)
	var b bytes.Buffer
	if err := page.Execute(&b, struct {
		Report  *Report
		Table   string
		Figures []Figure
	}{r, table.String(), figs}); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
