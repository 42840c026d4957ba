package harness_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The README shows a failure as Check prints it; TestCheckFindsShrinksAndReplays
// holds the sample to its own output, so that the sample cannot go stale.
const (
	readmePath        = "../README.md"
	sampleBegin       = "<!-- failure sample: begin -->\n```\n"
	sampleEnd         = "```\n<!-- failure sample: end -->"
	sampleElided      = "…"
	sampleTimelineKey = "    timeline:"
)

// readmeFailureSample is the README's sample, between its markers.
func readmeFailureSample() (string, error) {
	b, err := os.ReadFile(readmePath)
	if err != nil {
		return "", fmt.Errorf("reading the README: %w", err)
	}
	_, after, ok := strings.Cut(string(b), sampleBegin)
	sample, _, ok2 := strings.Cut(after, sampleEnd)
	if !ok || !ok2 {
		return "", fmt.Errorf("%s has no failure sample between %q and %q", readmePath, strings.TrimSpace(sampleBegin), sampleEnd)
	}
	return sample, nil
}

var (
	sampleNumber = regexp.MustCompile(`[0-9]+(\.[0-9]+)?`)
	samplePlan   = regexp.MustCompile(`\): \[.*\]$`)
)

// sampleShape is a line as a sample must show it: its numbers as # (a seed,
// a time, a count), a plan as [...] (which step a shrink keeps is the
// run's), the case's folder as testdata/kubeprop, as Check's default Dir.
func sampleShape(line, dir string) string {
	if dir != "" {
		line = strings.ReplaceAll(line, dir, "testdata/kubeprop")
	}
	line = samplePlan.ReplaceAllString(line, "): [...]")
	return sampleNumber.ReplaceAllString(line, "#")
}

// sameShape says how the sample differs from a failure's output, or
// nothing: the lines around the timeline must be the output's, in order,
// each in its shape; the timeline's lines the sample shows must be some of
// the output's, in their order (the sample elides the rest with …).
func sameShape(sample, out, dir string) error {
	split := func(s string) (head, timeline, tail []string) {
		lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
		i := slices.Index(lines, sampleTimelineKey)
		if i < 0 {
			return lines, nil, nil
		}
		j := i + 1
		for j < len(lines) && strings.HasPrefix(lines[j], "      ") {
			j++
		}
		return lines[:i+1], lines[i+1 : j], lines[j:]
	}
	shapes := func(lines []string, dir string) []string {
		var s []string
		for _, l := range lines {
			if strings.TrimSpace(l) != sampleElided {
				s = append(s, sampleShape(l, dir))
			}
		}
		return s
	}
	sHead, sTimeline, sTail := split(sample)
	oHead, oTimeline, oTail := split(out)
	if got, want := shapes(sHead, ""), shapes(oHead, dir); !slices.Equal(got, want) {
		return fmt.Errorf("the sample's first lines\n%s\nare not the output's\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got, want := shapes(sTail, ""), shapes(oTail, dir); !slices.Equal(got, want) {
		return fmt.Errorf("the sample's last lines\n%s\nare not the output's\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A timeline's times are right-aligned: past 10 s a line has one space
	// less before its time, which is a number's width, not a shape.
	unpadded := func(lines []string) []string {
		for i, l := range lines {
			lines[i] = strings.TrimLeft(l, " ")
		}
		return lines
	}
	rest := unpadded(shapes(oTimeline, dir))
	for _, l := range unpadded(shapes(sTimeline, "")) {
		i := slices.Index(rest, l)
		if i < 0 {
			return fmt.Errorf("the sample's timeline line\n%s\nis not among the output's, after the lines before it:\n%s", l, strings.Join(shapes(oTimeline, dir), "\n"))
		}
		rest = rest[i+1:]
	}
	return nil
}

// TestSameShape: the sample check passes the output itself, with numbers,
// plans and timeline lines of its own, and fails a sample whose lines are
// not the output's.
func TestSameShape(t *testing.T) {
	out := strings.Join([]string{
		"kubeprop: quiescent: writes went on: Widget web field status.x by [harness.test]",
		"    plan (shrunk from 3 to 1 steps): [ChildDelete{Child: 2}]",
		"    seed:     7",
		"    timeline:",
		"      0.000s setup",
		"      1.250s ChildDelete{Child: 2}",
		"      3.100s heal",
		"      11.250s teardown",
		"    scenario: /tmp/x/TestA/quiescent-1.yaml",
	}, "\n")
	same := strings.Join([]string{
		"kubeprop: quiescent: writes went on: Widget web field status.x by [harness.test]",
		"    plan (shrunk from 2 to 1 steps): [ScaleChange{Object: 0, Value: 1}]",
		"    seed:     1",
		"    timeline:",
		"      0.000s setup",
		"      …",
		"      2.000s heal",
		"       7.250s teardown",
		"    scenario: testdata/kubeprop/TestA/quiescent-1.yaml",
	}, "\n")
	require.NoError(t, sameShape(same, out, "/tmp/x"))
	for name, sample := range map[string]string{
		"another message":         strings.Replace(same, "writes went on", "writes go on", 1),
		"a line missing":          strings.Replace(same, "    seed:     1\n", "", 1),
		"a timeline line made up": strings.Replace(same, "      …", "      1.000s NodeLoss{Node: 1}", 1),
		"timeline out of order":   strings.Replace(strings.Replace(same, "      0.000s setup\n", "", 1), "      2.000s heal", "      2.000s heal\n      0.000s setup", 1),
		"another folder":          strings.Replace(same, "testdata/kubeprop/TestA", "testdata/kubeprop/TestB", 1),
	} {
		require.Error(t, sameShape(sample, out, "/tmp/x"), name)
	}
}

// TestDocs: the README stays a five-minute read, and every link of the
// README, the changelog and docs/ names a file of the repository (none
// leaves it).
func TestDocs(t *testing.T) {
	readme, err := os.ReadFile(readmePath)
	require.NoError(t, err)
	require.LessOrEqual(t, strings.Count(string(readme), "\n"), readmeMostLines,
		"the README is at most %d lines: move detail into docs/", readmeMostLines)
	pages, err := filepath.Glob("../docs/*.md")
	require.NoError(t, err)
	pages = append(pages, readmePath, "../CHANGELOG.md")
	link := regexp.MustCompile(`\]\(([^)]+)\)`)
	for _, page := range pages {
		b, err := os.ReadFile(page)
		require.NoError(t, err)
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target, _, _ := strings.Cut(m[1], "#")
			require.NotContains(t, target, "://", "%s links outside the repository: %s", page, m[1])
			path := filepath.Join(filepath.Dir(page), target)
			rel, err := filepath.Rel("..", path)
			require.NoError(t, err)
			require.False(t, strings.HasPrefix(rel, ".."), "%s links outside the repository: %s", page, m[1])
			_, err = os.Stat(path)
			require.NoError(t, err, "%s links to a file that is not there: %s", page, m[1])
		}
	}
}

// readmeMostLines is the README's length at most.
const readmeMostLines = 250
