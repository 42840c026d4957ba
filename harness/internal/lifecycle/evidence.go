package lifecycle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubeprop/kubeprop/harness/scenario"
)

// What a maintainer asks for first, saved beside each scenario
// (scenario.Evidence): the controller's log, the namespace's events, and
// the objects the case ended with. Each file holds at most evidenceLimit
// bytes, and its first line says when it was cut.

// events are the case namespace's Events, oldest first; none when they
// cannot be listed (the timeline says why: no reason to fail the case).
func (c *caseRun) events(ctx context.Context) []corev1.Event {
	var list corev1.EventList
	if err := c.faultClient.List(ctx, &list, client.InNamespace(c.namespace)); err != nil {
		c.logf("listing the namespace's events: %v", err)
		return nil
	}
	slices.SortStableFunc(list.Items, func(a, b corev1.Event) int { return firstSeen(a).Compare(firstSeen(b)) })
	return list.Items
}

// firstSeen is when an event (or the first of its series) happened.
func firstSeen(e corev1.Event) time.Time {
	for _, t := range []time.Time{e.EventTime.Time, e.FirstTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return e.CreationTimestamp.Time
}

// SaveEvidence writes the files beside the scenario at path
// (scenario.Evidence): the controller's log, the events of a failed case,
// the objects it ended with. SaveScenario writes them too.
func (r *Report) SaveEvidence(path string) error {
	logPath, eventsPath, objectsPath := scenario.Evidence(path)
	log := r.ControllerLog
	if len(log) == 0 {
		log = []byte("--- kubeprop: the controller logged nothing in this case (a Manager's or Func's logr logger, a Process's stdout and stderr)\n")
	}
	events := make([]any, len(r.Events))
	for i, e := range r.Events {
		e.APIVersion, e.Kind = "v1", "Event"
		e.ManagedFields = nil
		events[i] = e
	}
	var objects []any
	if r.Trace != nil && len(r.Trace.States) > 0 {
		final := slices.Clone(r.Trace.States[len(r.Trace.States)-1].Objects)
		slices.SortFunc(final, func(a, b *unstructured.Unstructured) int {
			return cmp.Or(cmp.Compare(a.GetKind(), b.GetKind()), cmp.Compare(a.GetName(), b.GetName()))
		})
		for _, o := range final {
			o = o.DeepCopy()
			o.SetManagedFields(nil)
			objects = append(objects, o.Object)
		}
	}
	eventsYAML, err := boundedList(events, "events, oldest first", evidenceLimit)
	if err != nil {
		return err
	}
	objectsYAML, err := boundedList(objects, "objects at the end of the case", evidenceLimit)
	if err != nil {
		return err
	}
	return errors.Join(
		writeEvidence(logPath, log),
		writeEvidence(eventsPath, eventsYAML),
		writeEvidence(objectsPath, objectsYAML))
}

func writeEvidence(path string, b []byte) error {
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("writing %s beside the scenario: %w", path, err)
	}
	return nil
}

// boundedList is items as a YAML v1 List of at most limit bytes: when the
// whole is larger, the first items are left out, and a first comment line
// says how many.
func boundedList(items []any, what string, limit int) ([]byte, error) {
	docs := make([][]byte, len(items))
	total := 0
	for i, item := range items {
		b, err := yaml.Marshal([]any{item})
		if err != nil {
			return nil, fmt.Errorf("writing the %s: %w", what, err)
		}
		docs[i] = b
		total += len(b)
	}
	cut := 0
	for ; total > limit && cut < len(docs); cut++ {
		total -= len(docs[cut])
	}
	head := fmt.Sprintf("# kubeprop: the %s (%d)\n", what, len(items))
	if cut > 0 {
		head = fmt.Sprintf("# kubeprop: cut: the first %d of the %d %s are left out (over %d bytes)\n", cut, len(items), what, limit)
	}
	out := []byte(head + "apiVersion: v1\nkind: List\n")
	if cut == len(docs) {
		return append(out, "items: []\n"...), nil
	}
	out = append(out, "items:\n"...)
	for _, d := range docs[cut:] {
		out = append(out, d...)
	}
	return out, nil
}
