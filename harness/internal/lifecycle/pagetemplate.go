package lifecycle

import "html/template"

// timelineHTML is the case as one self-contained page: the verdicts, then
// the timeline as SVG: a row for the failing property's evidence, one per
// fault step (its window shaded) and per user change, the controller's
// requests coloured by outcome, the writes per field manager, and the heal.
// When a failure's evidence takes a small part of the case (a streak of
// retries in a second of a minute), a second panel zooms in on it. Then
// the evidence listed, and the text timeline. It fits a 1280 px window:
// the SVG scales down to the page's width, labels sit one per row, and
// the text wraps. Times are seconds from the case's start.
var timelineHTML = template.Must(template.New("timeline").Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>kubeprop: {{.Title}}</title>
<style>
body { font-family: sans-serif; margin: 1.5em; max-width: 1200px; }
h1 { font-size: 1.4em; overflow-wrap: anywhere; }
h2 { font-size: 1.15em; }
pre { background: #f6f6f6; padding: 1em; white-space: pre-wrap; overflow-wrap: anywhere; }
code { overflow-wrap: anywhere; }
.fail { color: #b00020; } .pass { color: #1b5e20; }
svg { display: block; max-width: 100%; height: auto; }
svg text { font-size: 11px; font-family: monospace; }
.legend span { display: inline-block; margin-right: 1.2em; font-size: 0.9em; }
.legend i { display: inline-block; width: 0.8em; height: 0.8em; margin-right: 0.3em; vertical-align: middle; }
table { border-collapse: collapse; font-size: 0.9em; }
td, th { padding: 0.15em 0.8em 0.15em 0; text-align: left; vertical-align: top; overflow-wrap: anywhere; }
td.at { white-space: nowrap; font-family: monospace; }
</style></head><body>
<h1>{{.Title}}</h1>
<p>plan: <code>{{.Plan}}</code></p>
<ul class="verdicts">{{range .Verdicts}}<li class="{{.Class}}">{{.Message}}{{if .Detail}}<pre>{{.Detail}}</pre>{{end}}</li>{{end}}</ul>
<p class="legend"><span><i style="background:#2e7d32"></i>request ok</span><span><i style="background:#ef6c00"></i>refused by a fault</span><span><i style="background:#c62828"></i>error from the API server</span><span><i style="background:#1565c0"></i>write</span><span><i style="background:#ffcc80"></i>fault window</span><span><i style="background:#6a1b9a"></i>user change</span>{{if .Evidence}}<span><i style="background:#d50000"></i>evidence</span>{{end}}</p>
{{range .Panels}}<h2>{{.Caption}}</h2>
<svg class="timeline {{.Class}}" width="{{.Width}}" height="{{.Height}}" viewBox="0 0 {{.Width}} {{.Height}}" xmlns="http://www.w3.org/2000/svg">
{{$p := .}}{{range .Bands}}<rect class="evidence-band" x="{{.X}}" y="{{$p.Top}}" width="{{.W}}" height="{{$p.PlotHeight}}" fill="#d50000" fill-opacity="0.06"/>
{{end}}{{range .Rows}}<g class="row {{.Class}}"{{if .Property}} data-property="{{.Property}}"{{end}}><title>{{.Title}}</title>
<text class="label" x="4" y="{{.TextY}}">{{.Label}}</text>
<line x1="{{$p.Left}}" y1="{{.Y}}" x2="{{$p.Right}}" y2="{{.Y}}" stroke="#e0e0e0"/>
{{range .Spans}}<rect class="{{.Class}}" x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}" fill="{{.Fill}}"><title>{{.Title}}</title></rect>
{{end}}{{range .Ticks}}<line class="{{.Class}}" x1="{{.X}}" y1="{{.Y1}}" x2="{{.X}}" y2="{{.Y2}}" stroke="{{.Stroke}}" stroke-width="{{.Width}}"><title>{{.Title}}</title></line>
{{end}}</g>
{{end}}{{if .Heal}}<line class="heal" x1="{{.Heal}}" y1="{{.Top}}" x2="{{.Heal}}" y2="{{.Bottom}}" stroke="#2e7d32" stroke-width="2"/>
<text class="heal-label" x="{{.HealLabelX}}" y="12" fill="#2e7d32" text-anchor="{{.HealAnchor}}">heal at {{.HealAt}}</text>
{{end}}<line x1="{{.Left}}" y1="{{.Bottom}}" x2="{{.Right}}" y2="{{.Bottom}}" stroke="#9e9e9e"/>
{{range .Axis}}<line x1="{{.X}}" y1="{{$p.Bottom}}" x2="{{.X}}" y2="{{$p.AxisTickEnd}}" stroke="#9e9e9e"/><text class="axis" x="{{.X}}" y="{{$p.AxisTextY}}" text-anchor="middle">{{.Label}}</text>
{{end}}</svg>
{{end}}{{range .Evidence}}<h2>Evidence: {{.Property}}</h2>
<table class="evidence" data-property="{{.Property}}"><tr><th>at (s)</th><th>what</th></tr>
{{range .Lines}}<tr><td class="at">{{.At}}</td><td>{{.What}}</td></tr>
{{end}}{{if .More}}<tr><td></td><td>and {{.More}} more</td></tr>{{end}}</table>
{{end}}<h2>Timeline</h2><pre class="timeline-text">{{range .Timeline}}{{.}}
{{end}}</pre>
</body></html>
`))
