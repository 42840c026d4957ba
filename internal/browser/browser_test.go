package browser_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubeprop/kubeprop/internal/browser"
)

// TestInspectFindsProblems: a page too wide and labels drawn over each
// other are found; a page that fits has no problem; the counts are the
// page's.
func TestInspectFindsProblems(t *testing.T) {
	b, err := browser.Start(context.Background())
	require.NoError(t, err)
	t.Cleanup(b.Close)
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte("<!DOCTYPE html><html><body style=\"margin:0\">"+body+"</body></html>"), 0o644))
		return path
	}
	// The second label at y: 80 stands clear of the first, 20 on it.
	svg := func(y int) string {
		return `<svg class="timeline full" width="400" height="100"><g class="row evidence" data-property="converges">
<text x="4" y="20">evidence</text><text x="10" y="` + strconv.Itoa(y) + `">other</text>
<line class="evidence-mark" x1="50" x2="50" y1="0" y2="10"/><rect class="evidence-span" x="1" y="1" width="5" height="5"/></g>
<line class="request refused" x1="60" x2="60" y1="0" y2="10"/></svg>
<table class="evidence" data-property="converges"><tr><th>at</th></tr><tr><td>1.000</td></tr></table>`
	}

	fits, err := b.Inspect(write("fits.html", svg(80)), 1280)
	require.NoError(t, err)
	assert.Empty(t, fits.Problems(1280))
	assert.Equal(t, 1, fits.EvidenceMarks["converges"])
	assert.Equal(t, 1, fits.EvidenceSpans["converges"])
	assert.Equal(t, 1, fits.EvidenceListed["converges"])
	assert.Equal(t, 1, fits.Classes["request refused"])

	overlapping, err := b.Inspect(write("overlap.html", svg(20)), 1280)
	require.NoError(t, err)
	assert.Len(t, overlapping.Problems(1280), 1, "the two labels meet")

	wide, err := b.Inspect(write("wide.html", `<div style="width:1500px">wide</div>`), 1280)
	require.NoError(t, err)
	assert.Equal(t, []string{"the page is 1500 px wide, over the window's 1280"}, wide.Problems(1280))

	png := filepath.Join(dir, "fits.png")
	require.NoError(t, b.Screenshot(filepath.Join(dir, "fits.html"), png, 1280))
	head := make([]byte, 8)
	f, err := os.Open(png)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Read(head)
	require.NoError(t, err)
	assert.Equal(t, "\x89PNG\r\n\x1a\n", string(head), "a PNG")

	_, err = b.Inspect(filepath.Join(dir, "missing.html"), 1280)
	assert.ErrorContains(t, err, "missing.html")
}

// TestNoChromium: without Chromium, the error says how to install it.
func TestNoChromium(t *testing.T) {
	t.Setenv("KUBEPROP_CHROMIUM", filepath.Join(t.TempDir(), "no-such-chromium"))
	_, err := browser.Start(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "KUBEPROP_CHROMIUM")
	t.Setenv("KUBEPROP_CHROMIUM", "")
	t.Setenv("PATH", t.TempDir())
	_, err = browser.Start(context.Background())
	assert.ErrorIs(t, err, browser.ErrNoChromium)
	assert.Contains(t, err.Error(), "apt-get install chromium")
}
