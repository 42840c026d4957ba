package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/chromedp/chromedp"
)

// ErrNoChromium is returned when no Chromium is installed.
var ErrNoChromium = errors.New("no Chromium found: install Debian's chromium package (apt-get install chromium), or set KUBEPROP_CHROMIUM to a Chromium or Chrome binary")

// Path is the Chromium binary to run.
func Path() (string, error) {
	if p := os.Getenv("KUBEPROP_CHROMIUM"); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			return "", fmt.Errorf("KUBEPROP_CHROMIUM=%s: %w", p, err)
		}
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", ErrNoChromium
}

// Browser is one headless Chromium; Close stops it. Its methods may be
// called at once: each opens a tab of its own.
type Browser struct {
	ctx           context.Context
	cancel, close context.CancelFunc
}

// Start starts a headless Chromium. It lives until Close or until ctx
// ends, whichever comes first.
func Start(ctx context.Context) (*Browser, error) {
	path, err := Path()
	if err != nil {
		return nil, err
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		// As root (CI's containers) Chromium refuses to start sandboxed;
		// the pages are our own.
		chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	allocCtx, closeAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tabCtx, cancel := chromedp.NewContext(allocCtx)
	// The first Run starts the browser: a failure to start shows here.
	if err := chromedp.Do(tabCtx); err != nil {
		cancel()
		closeAlloc()
		return nil, fmt.Errorf("starting Chromium (%s): %w", path, err)
	}
	return &Browser{ctx: tabCtx, cancel: cancel, close: closeAlloc}, nil
}

// Close stops the browser and waits for its processes to end.
func (b *Browser) Close() {
	b.cancel()
	b.close()
}

// Page is what a page showed in a window of a given width.
type Page struct {
	// ScrollWidth is the document's width: wider than the window when
	// something overflows.
	ScrollWidth int `json:"scrollWidth"`
	// Overlaps are the pairs of SVG labels whose boxes meet.
	Overlaps []string `json:"overlaps"`
	// Classes counts the marks of the timeline of the whole case by
	// class: evidence-mark,
	// evidence-span, evidence-band, fault-window, user-change, write,
	// request ok, request refused, request error, delivery.
	Classes map[string]int `json:"classes"`
	// EvidenceMarks and EvidenceSpans count each property's evidence
	// drawn on the timeline; EvidenceListed the rows of its evidence
	// table.
	EvidenceMarks  map[string]int `json:"evidenceMarks"`
	EvidenceSpans  map[string]int `json:"evidenceSpans"`
	EvidenceListed map[string]int `json:"evidenceListed"`
	// Zoomed counts each property's evidence marks on the panels that
	// zoom in on it (a panel may show another property's too).
	Zoomed map[string]int `json:"zoomed"`
	// Text is the page's text, titles included, but for the case's
	// timeline of log lines.
	Text string `json:"text"`
}

// inspect gathers Page in the page.
const inspect = `(() => {
  const count = (sel) => document.querySelectorAll(sel).length;
  const classes = {};
  for (const c of ["evidence-mark", "evidence-span", "evidence-band", "fault-window", "user-change", "write",
                   "request.ok", "request.refused", "request.error", "delivery"]) {
    classes[c.replace(".", " ")] = count("svg.full ." + c);
  }
  const evidenceMarks = {}, evidenceSpans = {}, evidenceListed = {}, zoomed = {};
  for (const g of document.querySelectorAll("svg.full g.evidence")) {
    const p = g.dataset.property;
    evidenceMarks[p] = (evidenceMarks[p] || 0) + g.querySelectorAll(".evidence-mark").length;
    evidenceSpans[p] = (evidenceSpans[p] || 0) + g.querySelectorAll(".evidence-span").length;
  }
  for (const g of document.querySelectorAll("svg.zoom g.evidence")) {
    const p = g.dataset.property;
    zoomed[p] = (zoomed[p] || 0) + g.querySelectorAll(".evidence-mark").length;
  }
  for (const t of document.querySelectorAll("table.evidence")) {
    const p = t.dataset.property;
    evidenceListed[p] = (evidenceListed[p] || 0) + t.querySelectorAll("tr").length - 1;
  }
  // The page's text but the case's raw timeline, whose lines are stamped
  // with the case's clock.
  const summary = () => {
    const body = document.body.cloneNode(true);
    body.querySelectorAll("pre.timeline-text").forEach(e => e.remove());
    return body.textContent;
  };
  const texts = [...document.querySelectorAll("svg text")].map(t => ({t: t.textContent, r: t.getBoundingClientRect()}));
  const overlaps = [];
  for (let i = 0; i < texts.length; i++) {
    for (let j = i + 1; j < texts.length; j++) {
      const a = texts[i].r, b = texts[j].r;
      if (a.width && b.width && a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom) {
        overlaps.push(JSON.stringify(texts[i].t) + " and " + JSON.stringify(texts[j].t));
      }
    }
  }
  return JSON.stringify({scrollWidth: document.documentElement.scrollWidth, overlaps, classes,
    evidenceMarks, evidenceSpans, evidenceListed, zoomed, text: summary()});
})()`

// Inspect opens the page file in a window width px wide and reports what
// it shows.
func (b *Browser) Inspect(file string, width int) (Page, error) {
	url, err := fileURL(file)
	if err != nil {
		return Page{}, err
	}
	tab, closeTab := chromedp.NewContext(b.ctx)
	defer closeTab()
	if err := chromedp.Do(tab, chromedp.EmulateViewport(int64(width), 900), chromedp.Navigate(url)); err != nil {
		return Page{}, fmt.Errorf("opening %s in Chromium: %w", file, err)
	}
	out, err := chromedp.Run(tab, chromedp.Evaluate[string](inspect))
	if err != nil {
		return Page{}, fmt.Errorf("inspecting %s in Chromium: %w", file, err)
	}
	var p Page
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		return Page{}, fmt.Errorf("reading what Chromium showed of %s: %w", file, err)
	}
	return p, nil
}

// Screenshot saves a PNG of the whole page file, in a window width px
// wide, at png.
func (b *Browser) Screenshot(file, png string, width int) error {
	url, err := fileURL(file)
	if err != nil {
		return err
	}
	tab, closeTab := chromedp.NewContext(b.ctx)
	defer closeTab()
	if err := chromedp.Do(tab, chromedp.EmulateViewport(int64(width), 900), chromedp.Navigate(url)); err != nil {
		return fmt.Errorf("opening %s in Chromium: %w", file, err)
	}
	shot, err := chromedp.Run(tab, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		return fmt.Errorf("taking a screenshot of %s in Chromium: %w", file, err)
	}
	if err := os.WriteFile(png, shot, 0o644); err != nil {
		return fmt.Errorf("saving the screenshot of %s: %w", file, err)
	}
	return nil
}

func fileURL(file string) (string, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return "", fmt.Errorf("opening %s in Chromium: %w", file, err)
	}
	if _, err := os.Stat(abs); err != nil {
		return "", fmt.Errorf("opening %s in Chromium: %w", file, err)
	}
	return "file://" + abs, nil
}

// Problems are what keeps a page from fitting a window width px wide:
// overflow to the right, and labels drawn over each other.
func (p Page) Problems(width int) []string {
	var out []string
	if p.ScrollWidth > width {
		out = append(out, fmt.Sprintf("the page is %d px wide, over the window's %d", p.ScrollWidth, width))
	}
	for _, o := range p.Overlaps {
		out = append(out, "labels overlap: "+o)
	}
	return out
}
