package lifecycle

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness/internal/inject"
	"github.com/kubeprop/kubeprop/properties"
)

// The page's geometry, in SVG units (CSS pixels at full size).
const (
	pageWidth  = 1180
	plotLeft   = 300 // the rows' labels are left of it
	plotRight  = pageWidth - 40
	rowHeight  = 20
	plotTop    = 24 // the heal's label is above it
	labelChars = 44 // a row's label is cut there; its title has all of it
	// evidenceLines is how many of a failure's marks and spans the
	// page lists; the SVG draws all of them.
	evidenceLines = 30
	// zoomBelow: a failure's evidence that spans less than this share
	// of the case gets a panel of its own.
	zoomBelow = 0.4
)

// A timeline row's contents, in the trace's times: laid out per panel.
type (
	timedTick struct {
		at                   time.Time
		class, stroke, title string
		width                int
	}
	timedSpan struct {
		from, to           time.Time
		class, fill, title string
		band               bool // shaded over every row too
	}
	timedRow struct {
		class, label, property string
		ticks                  []timedTick
		spans                  []timedSpan
	}
)

type pageTick struct {
	Class, Stroke, Title string
	X, Y1, Y2, Width     int
}

type pageSpan struct {
	Class, Fill, Title string
	X, Y, W, H         int
}

type pageRow struct {
	Class, Label, Title, Property string
	Y, TextY                      int
	Ticks                         []pageTick
	Spans                         []pageSpan
}

type pageAxis struct {
	X     int
	Label string
}

type pageBand struct{ X, W int }

type pagePanel struct {
	Class, Caption                          string
	Width, Height, Left, Right, Top, Bottom int
	PlotHeight, AxisTickEnd, AxisTextY      int
	Heal, HealLabelX                        int
	HealAt, HealAnchor                      string
	Rows                                    []pageRow
	Bands                                   []pageBand
	Axis                                    []pageAxis
}

type pageVerdict struct{ Class, Message, Detail string }

type pageEvidenceLine struct{ At, What string }

type pageEvidence struct {
	Property string
	Lines    []pageEvidenceLine
	More     int
}

type page struct {
	Title, Plan string
	Panels      []pagePanel
	Verdicts    []pageVerdict
	Evidence    []pageEvidence
	Timeline    []string
}

// pageClock places times on a panel: the window from..to spans the plot.
type pageClock struct{ origin, from, to time.Time }

func (c pageClock) x(t time.Time) int {
	f := float64(t.Sub(c.from)) / float64(c.to.Sub(c.from))
	return plotLeft + int(float64(plotRight-plotLeft)*min(max(f, 0), 1))
}

func (c pageClock) shows(t time.Time) bool { return !t.Before(c.from) && !t.After(c.to) }

// at is a point in time as the page prints it: seconds from the case's
// start, to the millisecond (the page's durations are rounded; its times
// are not, or a streak's attempts would all be at "1s").
func at(origin, t time.Time) string { return fmt.Sprintf("%.3f", t.Sub(origin).Seconds()) }

// WriteHTML saves the report's timeline page at path, titled title.
func WriteHTML(r *Report, path, title string) error { return r.writeHTML(path, title) }

// writeHTML saves the report's timeline page at path.
func (r *Report) writeHTML(path, title string) error {
	var b bytes.Buffer
	if err := timelineHTML.Execute(&b, r.page(title)); err != nil {
		return fmt.Errorf("rendering the timeline page: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("writing the timeline page: %w", err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing the timeline page: %w", err)
	}
	return nil
}

func (r *Report) page(title string) page {
	tr := r.Trace
	if tr == nil {
		tr = &properties.Trace{}
	}
	end := tr.End
	if !end.After(tr.Start) {
		end = tr.Start.Add(time.Second)
	}
	p := page{Title: title, Plan: faults.FormatPlan(r.Plan), Timeline: r.Timeline}
	rows := r.timedRows(tr)
	p.Panels = append(p.Panels, panel(rows, tr, pageClock{tr.Start, tr.Start, end}, "full", "The case"))
	for _, f := range r.Failures {
		if from, to, ok := zoomOn(f.Evidence, tr.Start, end); ok {
			p.Panels = append(p.Panels, panel(rows, tr, pageClock{tr.Start, from, to}, "zoom",
				fmt.Sprintf("The evidence of %s, from %s to %s s", f.Property, at(tr.Start, from), at(tr.Start, to))))
		}
		p.Evidence = append(p.Evidence, evidenceListed(tr.Start, f))
		p.Verdicts = append(p.Verdicts, pageVerdict{Class: "fail", Message: f.Message, Detail: f.Detail})
	}
	if len(r.Failures) == 0 {
		p.Verdicts = append(p.Verdicts, pageVerdict{Class: "pass", Message: "every property held"})
	}
	return p
}

// timedRows are the page's rows: the failures' evidence first (what the
// page is about), a row per fault step (its window: until the heal, when
// every fault stops) and per user change, the watch events held back,
// the controller's requests, the writes by field manager.
func (r *Report) timedRows(tr *properties.Trace) []timedRow {
	var rows []timedRow
	o := tr.Start
	for _, f := range r.Failures {
		row := timedRow{class: "evidence", property: f.Property, label: "evidence: " + f.Property}
		for _, s := range f.Evidence.Spans {
			row.spans = append(row.spans, timedSpan{from: s.From, to: s.To, class: "evidence-span", fill: "#ff8a80", band: true,
				title: at(o, s.From) + "–" + at(o, s.To) + ": " + s.Label})
		}
		for _, m := range f.Evidence.Marks {
			row.ticks = append(row.ticks, timedTick{at: m.At, class: "evidence-mark", stroke: "#d50000", width: 2, title: at(o, m.At) + ": " + m.Label})
		}
		rows = append(rows, row)
	}
	healedOrEnd := tr.End
	if !tr.Healed.IsZero() {
		healedOrEnd = tr.Healed
	}
	var deliveries, starts []timedTick
	for _, e := range tr.Events {
		switch e.Kind {
		case properties.FaultEvent:
			rows = append(rows, timedRow{class: "fault", label: e.Name, spans: []timedSpan{{from: e.At, to: healedOrEnd, class: "fault-window", fill: "#ffcc80",
				title: at(o, e.At) + "–" + at(o, healedOrEnd) + ": " + e.Name}}})
		case properties.UserEvent:
			rows = append(rows, timedRow{class: "user", label: e.Name, ticks: []timedTick{{at: e.At, class: "user-change", stroke: "#6a1b9a", width: 3,
				title: at(o, e.At) + ": " + e.Name}}})
		case properties.DeliveryEvent:
			deliveries = append(deliveries, timedTick{at: e.At, class: "delivery", stroke: "#00838f", width: 1, title: at(o, e.At) + ": " + e.Name})
		case properties.StartEvent:
			starts = append(starts, timedTick{at: e.At, class: "start", stroke: "#37474f", width: 2, title: at(o, e.At) + ": " + e.Name})
		}
	}
	if len(starts) > 0 {
		rows = append(rows, timedRow{class: "starts", label: "the controller started anew", ticks: starts})
	}
	if len(deliveries) > 0 {
		rows = append(rows, timedRow{class: "deliveries", label: "watch events held back, delivered", ticks: deliveries})
	}
	if reqs := requestTicks(tr); len(reqs) > 0 {
		rows = append(rows, timedRow{class: "requests", label: fmt.Sprintf("requests of %s (%d)", tr.Controller, len(reqs)), ticks: reqs})
	}
	byManager := map[string][]timedTick{}
	for _, w := range tr.Writes {
		byManager[w.Manager] = append(byManager[w.Manager], timedTick{at: w.At, class: "write", stroke: "#1565c0", width: 1,
			title: at(o, w.At) + ": " + w.Kind + " " + w.Object() + " " + w.Field})
	}
	for _, m := range slices.Sorted(maps.Keys(byManager)) {
		rows = append(rows, timedRow{class: "writes", label: fmt.Sprintf("writes of %s (%d)", m, len(byManager[m])), ticks: byManager[m]})
	}
	return rows
}

// panel lays the rows out over the clock's window: what falls outside it
// is left out, and spans are cut at its edges.
func panel(rows []timedRow, tr *properties.Trace, clock pageClock, class, caption string) pagePanel {
	p := pagePanel{Class: class, Caption: caption, Width: pageWidth, Left: plotLeft, Right: plotRight, Top: plotTop}
	y := plotTop
	for _, r := range rows {
		row := pageRow{Class: r.class, Property: r.property, Title: r.label, Label: r.label, Y: y + rowHeight/2, TextY: y + rowHeight/2 + 4}
		if n := []rune(r.label); len(n) > labelChars {
			row.Label = string(n[:labelChars-1]) + "…"
		}
		for _, s := range r.spans {
			if s.to.Before(clock.from) || s.from.After(clock.to) {
				continue
			}
			x := clock.x(s.from)
			w := max(clock.x(s.to)-x, 1)
			row.Spans = append(row.Spans, pageSpan{Class: s.class, Fill: s.fill, Title: s.title, X: x, W: w, Y: y + 3, H: rowHeight - 6})
			if s.band {
				p.Bands = append(p.Bands, pageBand{X: x, W: w})
			}
		}
		for _, t := range r.ticks {
			if clock.shows(t.at) {
				x := clock.x(t.at)
				row.Ticks = append(row.Ticks, pageTick{Class: t.class, Stroke: t.stroke, Title: t.title, Width: t.width, X: x, Y1: y + 3, Y2: y + rowHeight - 3})
			}
		}
		p.Rows = append(p.Rows, row)
		y += rowHeight
	}
	p.Bottom = y + 4
	p.PlotHeight = p.Bottom - plotTop
	if !tr.Healed.IsZero() && clock.shows(tr.Healed) {
		p.Heal, p.HealAt = clock.x(tr.Healed), at(clock.origin, tr.Healed)
		p.HealLabelX, p.HealAnchor = p.Heal+3, "start"
		if p.Heal > plotRight-120 {
			p.HealLabelX, p.HealAnchor = p.Heal-3, "end"
		}
	}
	p.Axis = axis(clock)
	p.AxisTickEnd, p.AxisTextY = p.Bottom+4, p.Bottom+16
	p.Height = p.Bottom + 22
	return p
}

// zoomOn is the window a failure's evidence gets a panel of: its marks
// and spans with a margin, when they take a small part of the case.
func zoomOn(e properties.Evidence, start, end time.Time) (from, to time.Time, ok bool) {
	var times []time.Time
	for _, m := range e.Marks {
		times = append(times, m.At)
	}
	for _, s := range e.Spans {
		times = append(times, s.From, s.To)
	}
	if len(times) == 0 {
		return
	}
	from, to = slices.MinFunc(times, time.Time.Compare), slices.MaxFunc(times, time.Time.Compare)
	margin := max(to.Sub(from)/10, 20*time.Millisecond)
	from, to = from.Add(-margin), to.Add(margin)
	if from.Before(start) {
		from = start
	}
	if to.After(end) {
		to = end
	}
	return from, to, to.After(from) && float64(to.Sub(from)) < zoomBelow*float64(end.Sub(start))
}

// requestTicks are the trace's requests of the controller, coloured by
// outcome: ok, refused by a fault (the harness answered them: the API
// server never saw them), or an error from the API server. The ok ones
// come first, drawn under the others: a refused or failed one is never
// hidden.
func requestTicks(tr *properties.Trace) []timedTick {
	var ok, failed, refused []timedTick
	for _, r := range tr.Requests {
		if tr.Controller == "" || r.User != tr.Controller {
			continue
		}
		what := r.Verb + " " + r.ResourcePath()
		if r.Name != "" {
			what += " " + r.Name
		}
		t := timedTick{at: r.At, width: 1, title: fmt.Sprintf("%s: %s → %d", at(tr.Start, r.At), what, r.Code)}
		switch {
		case r.UserAgent == inject.UserAgentInjected:
			t.class, t.stroke, t.width = "request refused", "#ef6c00", 2
			t.title += " (refused by a fault)"
			refused = append(refused, t)
		case r.Code >= 400:
			t.class, t.stroke, t.width = "request error", "#c62828", 2
			failed = append(failed, t)
		default:
			t.class, t.stroke = "request ok", "#2e7d32"
			ok = append(ok, t)
		}
	}
	return slices.Concat(ok, failed, refused)
}

// axis marks the window at round steps, far enough apart that their
// labels never meet: time from the case's start on the whole case, from
// the window's start on a zoom.
func axis(clock pageClock) []pageAxis {
	const minGap = 70 // px between two labels
	span := clock.to.Sub(clock.from)
	steps := []time.Duration{time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond,
		50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second,
		5 * time.Second, 10 * time.Second, 20 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute,
		10 * time.Minute, 30 * time.Minute, time.Hour}
	step := steps[len(steps)-1]
	for _, s := range steps {
		if float64(plotRight-plotLeft)*float64(s)/float64(span) >= minGap {
			step = s
			break
		}
	}
	prefix := ""
	if !clock.from.Equal(clock.origin) {
		prefix = "+"
	}
	var out []pageAxis
	for d := time.Duration(0); d <= span; d += step {
		out = append(out, pageAxis{X: clock.x(clock.from.Add(d)), Label: prefix + d.String()})
	}
	return out
}

// evidenceListed is a failure's evidence as the page lists it, in time
// order: marks, and spans by their start.
func evidenceListed(origin time.Time, f Failure) pageEvidence {
	type line struct {
		at   time.Time
		text pageEvidenceLine
	}
	var lines []line
	for _, m := range f.Evidence.Marks {
		lines = append(lines, line{m.At, pageEvidenceLine{At: at(origin, m.At), What: m.Label}})
	}
	for _, s := range f.Evidence.Spans {
		lines = append(lines, line{s.From, pageEvidenceLine{At: at(origin, s.From) + "–" + at(origin, s.To), What: s.Label}})
	}
	slices.SortStableFunc(lines, func(a, b line) int { return a.at.Compare(b.at) })
	out := pageEvidence{Property: f.Property}
	if len(lines) == 0 {
		out.Lines = []pageEvidenceLine{{What: "the property names no time in the trace: see its message and detail above"}}
	}
	for i, l := range lines {
		if i == evidenceLines {
			out.More = len(lines) - i
			break
		}
		out.Lines = append(out.Lines, l.text)
	}
	return out
}
