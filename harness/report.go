package harness

import (
	"bytes"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/kubeprop/kubeprop/faults"
)

// timelineHTML is the case as one self-contained page: an SVG with a lane
// of fault steps and a lane of writes per field manager, the heal marked,
// then the verdicts and the text timeline.
var timelineHTML = template.Must(template.New("timeline").Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>kubeprop: {{.Title}}</title>
<style>
body { font-family: sans-serif; margin: 1.5em; }
pre { background: #f6f6f6; padding: 1em; }
.fail { color: #b00020; } .pass { color: #1b5e20; }
svg text { font-size: 11px; font-family: monospace; }
</style></head><body>
<h1>{{.Title}}</h1>
<p>plan: <code>{{.Plan}}</code></p>
<ul>{{range .Verdicts}}<li class="{{.Class}}">{{.Text}}</li>{{end}}</ul>
<svg width="{{.Width}}" height="{{.Height}}" xmlns="http://www.w3.org/2000/svg">
{{range .Lanes}}{{$y := .Y}}<text x="4" y="{{.Y}}">{{.Name}} ({{.Count}})</text>
<line x1="{{$.Left}}" y1="{{.Y}}" x2="{{$.Right}}" y2="{{.Y}}" stroke="#ddd"/>
{{range .Marks}}<line x1="{{.}}" y1="{{$.Dy $y}}" x2="{{.}}" y2="{{$.Dy2 $y}}" stroke="#1565c0"/>{{end}}
{{end}}{{range .Events}}<line x1="{{.X}}" y1="10" x2="{{.X}}" y2="{{$.Bottom}}" stroke="#e65100" stroke-dasharray="3,3"/>
<text x="{{.X}}" y="{{.LabelY}}" fill="#e65100">{{.Name}}</text>
{{end}}{{if .Heal}}<line x1="{{.Heal}}" y1="10" x2="{{.Heal}}" y2="{{.Bottom}}" stroke="#2e7d32" stroke-width="2"/>
<text x="{{.Heal}}" y="{{.Bottom}}" fill="#2e7d32">heal</text>{{end}}
<text x="{{.Left}}" y="{{.Height}}">0 s</text><text x="{{.Right}}" y="{{.Height}}" text-anchor="end">{{.Span}}</text>
</svg>
<h2>Timeline</h2><pre>{{range .Timeline}}{{.}}
{{end}}</pre>
</body></html>
`))

type htmlLane struct {
	Name  string
	Count int
	Y     int
	Marks []int
}

type htmlEvent struct {
	Name      string
	X, LabelY int
}

type htmlVerdict struct{ Class, Text string }

type htmlPage struct {
	Title, Plan, Span                  string
	Width, Height, Left, Right, Bottom int
	Heal                               int
	Lanes                              []htmlLane
	Events                             []htmlEvent
	Verdicts                           []htmlVerdict
	Timeline                           []string
}

func (p htmlPage) Dy(y int) int  { return y - 6 }
func (p htmlPage) Dy2(y int) int { return y + 6 }

// writeHTML saves the report's timeline page at path.
func (r *Report) writeHTML(path, title string) error {
	tr := r.Trace
	const left, width = 260, 1200
	span := tr.End.Sub(tr.Start)
	if span <= 0 {
		span = time.Second
	}
	x := func(t time.Time) int {
		return left + int(float64(width-left-20)*float64(t.Sub(tr.Start))/float64(span))
	}
	byManager := map[string]*htmlLane{}
	for _, w := range tr.Writes {
		l := byManager[w.Manager]
		if l == nil {
			l = &htmlLane{Name: w.Manager}
			byManager[w.Manager] = l
		}
		l.Count++
		l.Marks = append(l.Marks, x(w.At))
	}
	page := htmlPage{Title: title, Plan: faults.FormatPlan(r.Plan), Left: left, Right: width - 20, Width: width, Timeline: r.Timeline,
		Span: span.Round(10 * time.Millisecond).String()}
	var lanes []*htmlLane
	for _, l := range byManager {
		lanes = append(lanes, l)
	}
	sort.Slice(lanes, func(i, j int) bool { return lanes[i].Name < lanes[j].Name })
	y := 40
	for _, l := range lanes {
		l.Y = y
		y += 24
		page.Lanes = append(page.Lanes, *l)
	}
	page.Bottom = y
	for i, e := range tr.Events {
		page.Events = append(page.Events, htmlEvent{Name: e.Name, X: x(e.At), LabelY: 20 + 10*(i%2)})
	}
	if !tr.Healed.IsZero() {
		page.Heal = x(tr.Healed)
	}
	page.Height = y + 30
	for _, f := range r.Failures {
		page.Verdicts = append(page.Verdicts, htmlVerdict{Class: "fail", Text: f.Message + " — " + f.Detail})
	}
	if len(r.Failures) == 0 {
		page.Verdicts = append(page.Verdicts, htmlVerdict{Class: "pass", Text: "every property held"})
	}
	var b bytes.Buffer
	if err := timelineHTML.Execute(&b, page); err != nil {
		return fmt.Errorf("rendering the timeline: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("writing the timeline: %w", err)
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
