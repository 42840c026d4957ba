package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeprop/kubeprop/harness/internal/inject"
	"github.com/kubeprop/kubeprop/internal/browser"
	"github.com/kubeprop/kubeprop/properties"
)

// unroundedDuration is a duration printed with more digits than the page
// rounds to: 2.711663s, 143.665605ms.
var unroundedDuration = regexp.MustCompile(`\b\d+\.\d{2,}(s|ms|µs)\b`)

// TestTimelinePageShowsEvidence renders one failing page per built-in
// property, from a trace made to fail it, and opens each in headless
// Chromium at 1280 px: the failure's evidence is drawn (each mark and
// span) and listed, the requests are coloured by outcome, every fault has
// its window, durations are rounded, nothing overflows and no two labels
// meet.
func TestTimelinePageShowsEvidence(t *testing.T) {
	b, err := browser.Start(context.Background())
	require.NoError(t, err, "the timeline test opens pages in Chromium")
	t.Cleanup(b.Close)

	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	cm := func(name, value string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("ConfigMap")
		u.SetName(name)
		u.SetNamespace("kp-1")
		_ = unstructured.SetNestedField(u.Object, value, "data", "value")
		return u
	}
	notReady := func(properties.State) error { return errors.New("PodSet web: 1 of 3 pods ready") }
	atMostOne := func(s properties.State) error {
		if n := len(s.ByKind("ConfigMap")); n > 1 {
			return fmt.Errorf("%d ConfigMaps, at most 1 wanted", n)
		}
		return nil
	}
	base := func() *properties.Trace {
		return &properties.Trace{Start: t0, Healed: at(4000), End: at(40000), Final: true, Controller: UserController,
			Events: []properties.Event{
				{At: at(900), Kind: properties.UserEvent, Name: "ScaleChange{Object: 0, Replicas: 5}"},
				{At: at(1000), Kind: properties.FaultEvent, Name: "APIErrors{Error: InternalError, Requests: 30, Verb: patch, Resource: podsets, Subresource: status}"},
				{At: at(2000), Kind: properties.FaultEvent, Name: "NodeLoss{Node: 1}"},
			},
			States: []properties.State{{At: at(0), Objects: []*unstructured.Unstructured{cm("web", "1")}}},
		}
	}
	cases := []struct {
		property properties.Property
		trace    func() *properties.Trace
	}{
		{properties.BoundedBackoff(properties.BackoffOptions{}), func() *properties.Trace {
			tr := base()
			for i := range 12 {
				tr.Requests = append(tr.Requests, properties.Request{At: at(1000 + 7*i), User: UserController, Verb: "patch", Resource: "podsets", Subresource: "status", Name: "web", Code: 500, UserAgent: inject.UserAgentInjected})
			}
			for i := range 5 {
				tr.Requests = append(tr.Requests, properties.Request{At: at(3000 + 100*i), User: UserController, Verb: "get", Resource: "pods", Name: "web-1", Code: 200})
			}
			tr.Requests = append(tr.Requests, properties.Request{At: at(3600), User: UserController, Verb: "create", Resource: "pods", Code: 409})
			return tr
		}},
		{properties.NoFightLoop(properties.FightOptions{}), func() *properties.Trace {
			tr := base()
			tr.Controller = ""
			for i := range 6 {
				tr.Writes = append(tr.Writes, properties.Write{At: at(5000 + 300*i), Manager: []string{"podset-controller", "kubectl-edit"}[i%2], Kind: "Deployment", Name: "web", UID: "u1", Field: "spec.replicas", Value: fmt.Sprint(3 + i%2)})
			}
			return tr
		}},
		{properties.Converges("converges", notReady, properties.ConvergeOptions{Within: 30 * time.Second}), func() *properties.Trace {
			tr := base()
			tr.States = append(tr.States, properties.State{At: at(4500), Objects: tr.States[0].Objects})
			return tr
		}},
		{properties.Always("at-most-one", atMostOne), func() *properties.Trace {
			tr := base()
			two := []*unstructured.Unstructured{cm("web", "1"), cm("web-2", "1")}
			tr.States = append(tr.States, properties.State{At: at(1200), Objects: two}, properties.State{At: at(1811), Objects: tr.States[0].Objects})
			return tr
		}},
		{properties.Quiescent(properties.QuiesceOptions{}), func() *properties.Trace {
			tr := base()
			for ms := 4100; ms < 40000; ms += 211 {
				tr.Writes = append(tr.Writes, properties.Write{At: at(ms), Manager: "podset-controller", Kind: "PodSet", Name: "web", UID: "u1", Field: "status.lastSync", Value: fmt.Sprint(ms)})
			}
			return tr
		}},
		{properties.NoPanics(), func() *properties.Trace {
			tr := base()
			tr.Panics = []properties.Panic{{At: at(1500), Value: "runtime error: index out of range [3] with length 3", Stack: "goroutine 1"}}
			return tr
		}},
		{properties.MatchesReference(properties.ReferenceOptions{Kinds: []string{"ConfigMap"}}), func() *properties.Trace {
			tr := base()
			tr.States = append(tr.States, properties.State{At: at(4500), Objects: []*unstructured.Unstructured{cm("web", "2")}})
			tr.Reference = &properties.ReferenceRun{Trace: &properties.Trace{Start: t0, End: at(9000), States: tr.States[:1]}}
			return tr
		}},
	}
	for _, c := range cases {
		t.Run(c.property.Name(), func(t *testing.T) {
			tr := c.trace()
			v := c.property.Check(tr)
			require.Error(t, v.Err, "the trace is made to fail %s: %s", c.property.Name(), v.Detail)
			ev := v.Evidence
			require.NotEmpty(t, ev.Marks, "%s names no moment of its failure", c.property.Name())
			rep := &Report{Trace: tr, Failures: []Failure{{Property: c.property.Name(), Message: v.Err.Error(), Detail: v.Detail, Evidence: ev}},
				Timeline: []string{"   1.00s  step APIErrors{…}", "   4.00s  healed: faults stop"}}
			path := filepath.Join(t.TempDir(), "case.html")
			require.NoError(t, rep.writeHTML(path, "TestConformance/podset: "+c.property.Name()))

			page, err := b.Inspect(path, 1280)
			require.NoError(t, err)
			assert.Empty(t, page.Problems(1280))
			assert.Equal(t, len(ev.Marks), page.EvidenceMarks[c.property.Name()], "evidence marks drawn")
			assert.Equal(t, len(ev.Spans), page.EvidenceSpans[c.property.Name()], "evidence spans drawn")
			listed := min(len(ev.Marks)+len(ev.Spans), evidenceLines)
			if len(ev.Marks)+len(ev.Spans) > evidenceLines {
				listed++ // "and N more"
			}
			assert.Equal(t, listed, page.EvidenceListed[c.property.Name()], "evidence rows listed")
			if _, _, zoom := zoomOn(ev, tr.Start, tr.End); zoom {
				assert.Equal(t, len(ev.Marks), page.Zoomed[c.property.Name()], "evidence marks on the zoomed panel")
			}
			assert.Equal(t, 2, page.Classes["fault-window"], "a window per fault step")
			assert.Equal(t, 1, page.Classes["user-change"], "a mark per user change")
			assert.Empty(t, unroundedDuration.FindAllString(page.Text, -1), "durations not rounded")
			if c.property.Name() == "bounded-backoff" {
				assert.Equal(t, 12, page.Classes["request refused"], "requests refused by a fault")
				assert.Equal(t, 5, page.Classes["request ok"], "requests answered")
				assert.Equal(t, 1, page.Classes["request error"], "requests the API server refused")
			}
		})
	}
}
