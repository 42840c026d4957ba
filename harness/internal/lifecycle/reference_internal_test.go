package lifecycle

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness/storage"
	"github.com/kubeprop/kubeprop/properties"
)

// TestReferenceSteps: a reference run makes the user's changes, another
// writer's, and the node losses that last; no passing fault.
func TestReferenceSteps(t *testing.T) {
	scale := faults.ScaleChangeStep{Field: "spec.replicas", Value: 4}
	writer := faults.ConflictingWriterStep{Field: "spec.replicas", Value: 2, Rounds: 2}
	plan := []faults.Step{
		faults.NodeLossStep{Node: 0}, scale, faults.NodeLossStep{Node: 1}, faults.ContainerKillStep{Pod: 1},
		faults.APIErrorsStep{Error: faults.Conflict, Requests: 3}, writer, faults.NodeRecoverStep{Node: 4},
		faults.RecreateStep{}, faults.ControllerRestartStep{StaleMs: 1000}, faults.NodeLossStep{Node: 2},
	}
	// Node 4 is node 1 of 3: its loss passes.
	require.Equal(t, []faults.Step{faults.NodeLossStep{Node: 0}, scale, writer, faults.RecreateStep{}, faults.NodeLossStep{Node: 2}},
		ReferenceSteps(plan, 3))
	require.Empty(t, ReferenceSteps([]faults.Step{faults.ChildDeleteStep{}, faults.CrashLoopStep{Pod: 1, Starts: 2}}, 3))

	// A burst: its net changes.
	burst := faults.BurstStep{Steps: []faults.Step{scale, faults.ScaleChangeStep{Field: "spec.replicas", Value: 1}}, GapMs: 50}
	require.Equal(t, []faults.Step{burst.Steps[1]}, ReferenceSteps([]faults.Step{faults.ControllerRestartStep{}, burst}, 3))
	require.True(t, netted([]faults.Step{faults.ControllerRestartStep{}, burst}))
	apart := faults.BurstStep{Steps: []faults.Step{scale, faults.RecreateStep{}}, GapMs: 50}
	require.Equal(t, []faults.Step{apart}, ReferenceSteps([]faults.Step{apart}, 3))
	require.False(t, netted([]faults.Step{apart, scale}))
}

// TestAsReferenceNamed: a case makes the user changes as its reference
// run named them (the claim it grew), its faults as they are, and skips
// those its reference could not make.
func TestAsReferenceNamed(t *testing.T) {
	grow := faults.VolumeGrowthStep{Claim: 5, ByGi: 2}
	plan := []faults.Step{faults.ContainerKillStep{Pod: 1}, grow, faults.ControllerRestartStep{}, faults.ScaleChangeStep{Field: "spec.replicas", Value: 1}}
	named := []faults.Step{faults.VolumeGrowthStep{Claim: 5, ByGi: 2, Name: "data-db-0"}, faults.ScaleChangeStep{Field: "spec.replicas", Value: 1}}
	out, skip := asReferenceNamed(plan, named, 3)
	require.Equal(t, []faults.Step{faults.ContainerKillStep{Pod: 1}, named[0], faults.ControllerRestartStep{}, named[1]}, out)
	require.Empty(t, skip)
	require.Equal(t, grow, plan[1], "the plan given is left as it was")
	out, _ = asReferenceNamed(plan, named[:1], 3)
	require.Equal(t, plan, out, "steps that do not line up are left")
	// The reference could not grow a claim (none bound in time): the case
	// does not either.
	out, skip = asReferenceNamed(plan, []faults.Step{nil, named[1]}, 3)
	require.Equal(t, []faults.Step{faults.ContainerKillStep{Pod: 1}, grow, faults.ControllerRestartStep{}, named[1]}, out)
	require.Equal(t, []int{1}, skip)

	// A burst is made whole, though its reference made its net changes,
	// and even when they changed nothing.
	burst := faults.BurstStep{Steps: []faults.Step{faults.ScaleChangeStep{Field: "spec.replicas", Value: 5}, faults.ScaleChangeStep{Field: "spec.replicas", Value: 3}}, GapMs: 50}
	out, skip = asReferenceNamed([]faults.Step{burst}, []faults.Step{nil}, 3)
	require.Equal(t, []faults.Step{burst}, out)
	require.Empty(t, skip)
	out, skip = asReferenceNamed([]faults.Step{burst}, []faults.Step{burst.Steps[1]}, 3)
	require.Equal(t, []faults.Step{burst}, out)
	require.Empty(t, skip)
}

// TestReferenceSettled: a reference run ends 2 s after its last step or
// write, once no claim waits for the hollow provisioner's volume; at its
// last check, whatever it waits for.
func TestReferenceSettled(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	claim := func(phase, provisioner string) *unstructured.Unstructured {
		c := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
			"metadata": map[string]any{"name": "data-db-0", "annotations": map[string]any{"volume.kubernetes.io/storage-provisioner": provisioner}},
			"status":   map[string]any{"phase": phase}}}
		return c
	}
	trace := func(end time.Duration, c *unstructured.Unstructured) *properties.Trace {
		return &properties.Trace{Start: t0, Healed: t0.Add(time.Second), End: t0.Add(end),
			Writes: []properties.Write{{At: t0.Add(time.Second)}},
			States: []properties.State{{At: t0, Objects: []*unstructured.Unstructured{c}}}}
	}
	require.False(t, settledEnd.Check(trace(2*time.Second, claim("Bound", storage.Driver))).Done, "writes go on")
	require.True(t, settledEnd.Check(trace(4*time.Second, claim("Bound", storage.Driver))).Done)
	v := settledEnd.Check(trace(4*time.Second, claim("Pending", storage.Driver)))
	require.False(t, v.Done)
	require.Equal(t, "claims wait for their volumes", v.Detail)
	require.True(t, settledEnd.Check(trace(4*time.Second, claim("Pending", "other.example"))).Done, "another provisioner's claim may wait for ever")
	final := trace(4*time.Second, claim("Pending", storage.Driver))
	final.Final = true
	require.True(t, settledEnd.Check(final).Done)

	// A StatefulSet short of a pod: its controller makes it, however long
	// the quiet; unless a pod of its is being deleted (on a lost node,
	// for ever).
	set := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "StatefulSet",
		"metadata": map[string]any{"name": "db"}, "spec": map[string]any{"replicas": int64(3)}, "status": map[string]any{"readyReplicas": int64(2)}}}
	short := trace(4*time.Second, claim("Bound", storage.Driver))
	short.States[0].Objects = append(short.States[0].Objects, set)
	v = settledEnd.Check(short)
	require.False(t, v.Done)
	require.Equal(t, "StatefulSet db is on its way", v.Detail)
	pod := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "db-2",
		"deletionTimestamp": "2026-01-01T00:00:00Z", "ownerReferences": []any{map[string]any{"kind": "StatefulSet", "name": "db"}}}}}
	short.States[0].Objects = append(short.States[0].Objects, pod)
	require.True(t, settledEnd.Check(short).Done)

	// The quiet counts from the last step, write, or write request, not
	// from the heal: the last step's settle already saw some of it.
	settled := trace(3500*time.Millisecond, claim("Bound", storage.Driver))
	settled.Healed = t0.Add(3 * time.Second)
	settled.Events = []properties.Event{{At: t0.Add(time.Second), Kind: properties.UserEvent}}
	require.True(t, settledEnd.Check(settled).Done, "quiet for 2.5 s, since the step and its write")
	settled.Events[0].At = t0.Add(2 * time.Second)
	require.False(t, settledEnd.Check(settled).Done, "quiet for 1.5 s since the step")
	settled.Events[0].At = t0.Add(time.Second)
	settled.Requests = []properties.Request{{At: t0.Add(3 * time.Second), Verb: "update", Resource: "leases"}, {At: t0.Add(3 * time.Second), Verb: "create", Resource: "events"}}
	require.True(t, settledEnd.Check(settled).Done, "a lease renewed and an Event are not the run moving")
	settled.Requests = append(settled.Requests, properties.Request{At: t0.Add(3 * time.Second), Verb: "patch", Resource: "configmaps"})
	require.False(t, settledEnd.Check(settled).Done, "a write of a kind not watched is")
}
