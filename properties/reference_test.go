package properties

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// runObjects are one run's objects in namespace ns: an App owning a
// StatefulSet of two pods with a claim each, and two pods of a
// generateName. What differs between two healthy runs differs with run:
// UIDs, versions, times, generated suffixes, nodes, IPs, restarts.
func runObjects(ns string, run int) []*unstructured.Unstructured {
	meta := func(kind, name, generateName string, owner string) map[string]any {
		m := map[string]any{"name": name, "namespace": ns, "uid": fmt.Sprintf("uid-%d-%s", run, name),
			"resourceVersion": fmt.Sprint(100 * run), "generation": int64(run),
			"creationTimestamp": t0.Add(time.Duration(run) * time.Minute).Format(time.RFC3339),
			"managedFields":     []any{map[string]any{"manager": "x", "time": "t"}}}
		if generateName != "" {
			m["generateName"] = generateName
		}
		if owner != "" {
			kind, name, _ := strings.Cut(owner, "/")
			m["ownerReferences"] = []any{map[string]any{"kind": kind, "name": name, "uid": fmt.Sprintf("uid-%d-%s", run, name)}}
		}
		return m
	}
	pod := func(name, generateName, owner string) *unstructured.Unstructured {
		node := fmt.Sprintf("%s-node-%d", ns, run%3)
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta("Pod", name, generateName, owner),
			"spec": map[string]any{"nodeName": node, "containers": []any{map[string]any{"name": "app", "image": "app:1",
				"env": []any{map[string]any{"name": "PEER", "value": "db-0.db." + ns + ".svc"}}}}},
			"status": map[string]any{"phase": "Running", "podIP": fmt.Sprintf("10.0.0.%d", run), "startTime": t0.Format(time.RFC3339),
				"conditions": conditions(run),
				"containerStatuses": []any{map[string]any{"name": "app", "ready": true, "restartCount": int64(run),
					"containerID": fmt.Sprintf("sim://%d", run), "lastState": map[string]any{"terminated": map[string]any{"exitCode": int64(137)}}}}}}}
	}
	claim := func(name string) *unstructured.Unstructured {
		m := meta("PersistentVolumeClaim", name, "", "")
		m["annotations"] = map[string]any{"volume.kubernetes.io/selected-node": fmt.Sprintf("%s-node-%d", ns, run%3)}
		status := map[string]any{"phase": "Bound", "capacity": map[string]any{"storage": "1Gi"}}
		if run == 1 { // grown to its size in one run, made at it in the other
			status["allocatedResources"] = map[string]any{"storage": "1Gi"}
		}
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": m,
			"spec":   map[string]any{"volumeName": fmt.Sprintf("pvc-%d", run), "resources": map[string]any{"requests": map[string]any{"storage": "1Gi"}}},
			"status": status}}
	}
	// Made-up names, as the API server and controllers make them.
	suffix := func(i int) string { return "web-" + string(randomChars[run]) + string(randomChars[i]) + "xz2" }
	revision := "db-" + strings.Repeat(string(randomChars[run]), 10)
	revisionObject := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "ControllerRevision",
		"metadata": meta("ControllerRevision", revision, "", "StatefulSet/db"), "revision": int64(1),
		"data": map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"instance": fmt.Sprintf("uid-%d-web", run)}}}}}}}
	refs, _, _ := unstructured.NestedSlice(revisionObject.Object, "metadata", "ownerReferences")
	refs[0].(map[string]any)["controller"] = true
	_ = unstructured.SetNestedSlice(revisionObject.Object, refs, "metadata", "ownerReferences")
	setPod := func(p *unstructured.Unstructured) *unstructured.Unstructured {
		p.SetGenerateName("db-") // as the StatefulSet controller makes its pods
		p.SetLabels(map[string]string{"controller-revision-hash": revision, "instance": fmt.Sprintf("uid-%d-web", run)})
		_ = unstructured.SetNestedSlice(p.Object, []any{map[string]any{"name": "data", "persistentVolumeClaim": map[string]any{"claimName": "data-" + p.GetName()}}}, "spec", "volumes")
		return p
	}
	app := meta("App", "web", "", "")
	// A list of its pods' generated names, one of them gone (an
	// annotation of the controller's own).
	app["annotations"] = map[string]any{"pods": suffix(1) + "," + suffix(2) + ",web-" + strings.Repeat(string(randomChars[run]), 5)}
	return []*unstructured.Unstructured{
		{Object: map[string]any{"apiVersion": "test/v1", "kind": "App", "metadata": app,
			"spec":   map[string]any{"replicas": int64(2)},
			"status": map[string]any{"readyReplicas": int64(2), "observedGeneration": int64(run), "lastUpdate": t0.Add(time.Duration(run) * time.Hour).Format(time.RFC3339Nano)}}},
		{Object: map[string]any{"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta("StatefulSet", "db", "", "App/web"),
			"spec":   map[string]any{"replicas": int64(2), "serviceName": "db"},
			"status": map[string]any{"readyReplicas": int64(2), "collisionCount": int64(run), "currentRevision": revision}}},
		setPod(pod("db-0", "", "StatefulSet/db")), setPod(pod("db-1", "", "StatefulSet/db")),
		claim("data-db-0"), claim("data-db-1"),
		pod(suffix(1), "web-", "App/web"), pod(suffix(2), "web-", "App/web"),
		revisionObject,
	}
}

// conditions are a pod's, in an order that differs from run to run.
func conditions(run int) []any {
	ready := map[string]any{"type": "Ready", "status": "True", "lastTransitionTime": t0.Add(time.Duration(run) * time.Second).Format(time.RFC3339)}
	scheduled := map[string]any{"type": "PodScheduled", "status": "True"}
	if run < 5 { // the reference (run 1) and the case (run 7) differ
		return []any{ready, scheduled}
	}
	return []any{scheduled, ready}
}

// referenceTrace is a case's trace: healed at 1 s, its states at the
// given seconds, each the objects change makes of run 7's in kp-7 (nil:
// as they are); its reference is run 1's in kp-1.
func referenceTrace(end time.Duration, change func(at int, objects []*unstructured.Unstructured) []*unstructured.Unstructured, seconds ...int) *Trace {
	tr := &Trace{Healed: at(s), End: at(end), Reference: &ReferenceRun{Trace: &Trace{States: []State{{At: t0, Objects: runObjects("kp-1", 1)}}}}}
	for _, sec := range seconds {
		objects := runObjects("kp-7", 7)
		if change != nil {
			objects = change(sec, objects)
		}
		tr.States = append(tr.States, State{At: at(time.Duration(sec) * s), Objects: objects})
	}
	return tr
}

func set(o *unstructured.Unstructured, value any, path ...string) {
	if err := unstructured.SetNestedField(o.Object, value, path...); err != nil {
		panic(err)
	}
}

func TestMatchesReference(t *testing.T) {
	p := MatchesReference(ReferenceOptions{Within: 10 * s})
	scaledUntil := func(sec int) func(int, []*unstructured.Unstructured) []*unstructured.Unstructured {
		return func(at int, objects []*unstructured.Unstructured) []*unstructured.Unstructured {
			if at < sec {
				set(objects[0], int64(3), "spec", "replicas")
			}
			return objects
		}
	}
	t.Run("what differs between healthy runs is left out", func(t *testing.T) {
		v := p.Check(referenceTrace(6*s, scaledUntil(3), 0, 2, 3))
		require.True(t, v.Done)
		require.NoError(t, v.Err)
		require.Contains(t, v.Detail, "matches the reference 2s after the heal")
	})
	t.Run("not yet stable", func(t *testing.T) {
		v := p.Check(referenceTrace(4*s, scaledUntil(3), 0, 2, 3))
		require.False(t, v.Done, v.Detail)
	})
	t.Run("a field differs, an object is missing", func(t *testing.T) {
		change := func(_ int, objects []*unstructured.Unstructured) []*unstructured.Unstructured {
			set(objects[0], int64(3), "spec", "replicas")
			set(objects[2], "app:2", "spec", "containers") // not a list: the list as a whole differs
			return append(objects[:5], objects[6:]...)     // no data-db-1
		}
		v := p.Check(referenceTrace(5*s, change, 0, 2))
		require.False(t, v.Done, "differs, within the deadline: %s", v.Detail)
		v = p.Check(referenceTrace(20*s, change, 0, 2))
		require.True(t, v.Done)
		require.EqualError(t, v.Err, "matches-reference: the end state differs from the reference run's: "+
			"App web spec.replicas; PersistentVolumeClaim data-db-1 missing; Pod db-0 spec.containers")
		require.Contains(t, v.Detail, "-reference +case")
		require.Contains(t, v.Detail, `"replicas": int64(2)`)
	})
	t.Run("an IP the cluster gave, copied by the controller, is what holds it", func(t *testing.T) {
		// The App's status names its first member's IP, and its service's
		// address: each run's pods and Service have their own.
		withAddresses := func(run int, objects []*unstructured.Unstructured, leader int) []*unstructured.Unstructured {
			for i, o := range objects {
				if o.GetKind() == "Pod" {
					set(o, fmt.Sprintf("198.18.%d.%d", run, i), "status", "podIP")
					set(o, fmt.Sprintf("127.0.0.%d", run), "status", "hostIP")
				}
			}
			svc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Service",
				"metadata": map[string]any{"name": "db", "namespace": objects[0].GetNamespace(),
					"ownerReferences": []any{map[string]any{"kind": "App", "name": "web", "uid": fmt.Sprintf("uid-%d-web", run)}}},
				"spec": map[string]any{"clusterIP": fmt.Sprintf("10.0.%d.9", run)}}}
			set(objects[0], fmt.Sprintf("198.18.%d.%d:6379", run, leader), "status", "leader")
			set(objects[0], fmt.Sprintf("http://10.0.%d.9:8265", run), "status", "dashboard")
			set(objects[0], fmt.Sprintf("127.0.0.%d", run), "status", "node")
			set(objects[0], "192.0.2.1", "spec", "gateway") // the user's
			return append(objects, svc)
		}
		ref := referenceTrace(20*s, func(_ int, objects []*unstructured.Unstructured) []*unstructured.Unstructured {
			return withAddresses(7, objects, 2)
		}, 0)
		ref.Reference.Trace.States[0].Objects = withAddresses(1, ref.Reference.Trace.States[0].Objects, 2)
		v := p.Check(ref)
		require.NoError(t, v.Err, v.Detail)
		require.True(t, v.Done)
		// Another member's IP is no longer the first member's.
		other := referenceTrace(20*s, func(_ int, objects []*unstructured.Unstructured) []*unstructured.Unstructured {
			return withAddresses(7, objects, 3)
		}, 0)
		other.Reference = ref.Reference
		v = p.Check(other)
		require.EqualError(t, v.Err, "matches-reference: the end state differs from the reference run's: App web status.leader")
		require.Contains(t, v.Detail, "<IP of Pod db-0>:6379")
		require.Contains(t, v.Detail, "<IP of Pod db-1>:6379")
	})
	t.Run("a group of a generateName counts", func(t *testing.T) {
		change := func(_ int, objects []*unstructured.Unstructured) []*unstructured.Unstructured {
			return append(objects[:7], objects[8:]...)
		}
		v := p.Check(referenceTrace(20*s, change, 0))
		require.EqualError(t, v.Err, "matches-reference: the end state differs from the reference run's: Pod web-*: 1 objects, the reference 2")
	})
	t.Run("held in deletion", func(t *testing.T) {
		// db-1 is left Terminating on a lost node, and a pod of the group
		// too (its replacement runs): their owners' status cannot settle.
		change := func(_ int, objects []*unstructured.Unstructured) []*unstructured.Unstructured {
			gone := metav1.NewTime(t0)
			objects[3].SetDeletionTimestamp(&gone)
			set(objects[1], int64(1), "status", "readyReplicas")
			set(objects[0], int64(1), "status", "readyReplicas")
			set(objects[5], "Pending", "status", "phase") // data-db-1, which the pod mounts
			held := objects[6].DeepCopy()
			held.SetName("web-held2")
			held.SetDeletionTimestamp(&gone)
			return append(objects, held)
		}
		v := p.Check(referenceTrace(20*s, change, 0))
		require.NoError(t, v.Err, v.Detail)
		require.True(t, v.Done)
	})
	t.Run("against a burst's net changes, what both runs have", func(t *testing.T) {
		// The case acted on a change of its burst that the reference left
		// out: an extra pod of the group and another StatefulSet pod stay
		// (history); the StatefulSet's own spec must still match.
		extra := func(_ int, objects []*unstructured.Unstructured) []*unstructured.Unstructured {
			more := objects[6].DeepCopy()
			more.SetName("web-" + string(randomChars[7]) + "9xz2")
			third := objects[3].DeepCopy()
			third.SetName("db-2")
			return append(objects, more, third)
		}
		net := func(tr *Trace) *Trace {
			tr.Reference.NetOfBursts = true
			return tr
		}
		v := p.Check(net(referenceTrace(20*s, extra, 0)))
		require.NoError(t, v.Err, v.Detail)
		require.True(t, v.Done)
		v = p.Check(referenceTrace(20*s, extra, 0))
		require.EqualError(t, v.Err, "matches-reference: the end state differs from the reference run's: Pod db-2 not in the reference; Pod web-*: 3 objects, the reference 2")
		acted := func(sec int, objects []*unstructured.Unstructured) []*unstructured.Unstructured {
			set(objects[1], int64(3), "spec", "replicas")
			return extra(sec, objects)
		}
		v = p.Check(net(referenceTrace(20*s, acted, 0)))
		require.EqualError(t, v.Err, "matches-reference: the end state differs from the reference run's: StatefulSet db spec.replicas")
	})
	t.Run("against the reference without a change set again", func(t *testing.T) {
		// The reference run grew the claims to 3Gi and refused the later
		// 2Gi; the case never got to grow them to 3Gi and grew them to
		// 2Gi: it ends as the plan without the 3Gi does.
		storage := func(gi string) func(int, []*unstructured.Unstructured) []*unstructured.Unstructured {
			return func(_ int, objects []*unstructured.Unstructured) []*unstructured.Unstructured {
				for _, claim := range objects[4:6] {
					set(claim, gi, "spec", "resources", "requests", "storage")
				}
				return objects
			}
		}
		alternative := func(tr *Trace, gi string) *Trace {
			objects := storage(gi)(0, runObjects("kp-3", 3))
			tr.Reference.Alternative = &ReferenceRun{Trace: &Trace{States: []State{{At: t0, Objects: objects}}}}
			return tr
		}
		v := p.Check(referenceTrace(20*s, storage("2Gi"), 0))
		require.EqualError(t, v.Err, "matches-reference: the end state differs from the reference run's: "+
			"PersistentVolumeClaim data-db-0 spec.resources.requests.storage; PersistentVolumeClaim data-db-1 spec.resources.requests.storage")
		v = p.Check(alternative(referenceTrace(20*s, storage("2Gi"), 0), "2Gi"))
		require.NoError(t, v.Err, v.Detail)
		require.True(t, v.Done)
		require.Contains(t, v.Detail, "without the user changes set again")
		v = p.Check(alternative(referenceTrace(20*s, storage("4Gi"), 0), "2Gi"))
		require.ErrorContains(t, v.Err, "differs from the reference run's", "neither run ends there")
		v = p.Check(alternative(referenceTrace(20*s, nil, 0), "2Gi"))
		require.NoError(t, v.Err, "the reference run itself comes first")
		require.NotContains(t, v.Detail, "without the user changes")
	})
	t.Run("reached", func(t *testing.T) {
		// The reference at 0 s is run 1's objects; the case's at 2 s are
		// run 7's as they are, at 3 s with another replica count.
		tr := referenceTrace(20*s, func(at int, objects []*unstructured.Unstructured) []*unstructured.Unstructured {
			if at == 3 {
				set(objects[1], int64(3), "spec", "replicas")
			}
			return objects
		}, 2, 3)
		require.True(t, p.(Referenced).Reached(tr, at(2*s), t0), "what differs between healthy runs is left out")
		require.False(t, p.(Referenced).Reached(tr, at(3*s), t0))
		require.False(t, p.(Referenced).Reached(tr, at(time.Second), t0), "no state of the case yet")
	})
	t.Run("history is no state", func(t *testing.T) {
		// The ControllerRevision deleted: its name is still in values.
		change := func(_ int, objects []*unstructured.Unstructured) []*unstructured.Unstructured {
			return objects[:len(objects)-1]
		}
		v := p.Check(referenceTrace(20*s, change, 0))
		require.NoError(t, v.Err, v.Detail)
	})
	t.Run("a claim no pod mounts", func(t *testing.T) {
		// Left behind by a scale up to 5 and down again, which the
		// reference run's StatefulSet never acted on.
		change := func(_ int, objects []*unstructured.Unstructured) []*unstructured.Unstructured {
			left := objects[4].DeepCopy()
			left.SetName("data-db-4")
			return append(objects, left)
		}
		v := p.Check(referenceTrace(20*s, change, 0))
		require.NoError(t, v.Err, v.Detail)
	})
	t.Run("the reference run failed", func(t *testing.T) {
		tr := referenceTrace(20*s, nil, 0)
		tr.Reference.Failed = errors.New("converges: did not converge within 30s after the faults healed")
		v := p.Check(tr)
		require.EqualError(t, v.Err, "matches-reference: the reference run failed: converges: did not converge within 30s after the faults healed")
	})
	t.Run("no reference run", func(t *testing.T) {
		tr := referenceTrace(20*s, nil, 0)
		tr.Reference = nil
		require.False(t, p.Check(tr).Done)
		tr.Final = true
		require.ErrorContains(t, p.Check(tr).Err, "the case has no reference run")
	})
	t.Run("kinds and ignored paths", func(t *testing.T) {
		p := MatchesReference(ReferenceOptions{Kinds: []string{"StatefulSet"}, Ignore: []string{"status.phase", "metadata.labels[app.kubernetes.io/name]", "spec.nothing"}})
		change := func(_ int, objects []*unstructured.Unstructured) []*unstructured.Unstructured {
			set(objects[0], int64(9), "spec", "replicas") // the App is not compared
			set(objects[2], "Pending", "status", "phase")
			labels := objects[2].GetLabels()
			labels["app.kubernetes.io/name"] = "x"
			objects[2].SetLabels(labels)
			return objects
		}
		v := p.Check(referenceTrace(20*s, change, 0))
		require.NoError(t, v.Err, v.Detail)
		require.Contains(t, v.Detail, "Ignore paths that matched nothing: spec.nothing")
		// A pod of the StatefulSet (owned) is compared; a claim always is.
		change2 := func(at int, objects []*unstructured.Unstructured) []*unstructured.Unstructured {
			set(objects[3], "Evicted", "status", "reason")
			set(objects[4], "2Gi", "status", "capacity", "storage")
			return change(at, objects)
		}
		v = p.Check(referenceTrace(40*s, change2, 0))
		require.EqualError(t, v.Err, "matches-reference: the end state differs from the reference run's: "+
			"PersistentVolumeClaim data-db-0 status.capacity.storage; Pod db-1 status.reason")
	})
	t.Run("the controller deleted more claims", func(t *testing.T) {
		// Both runs re-create the Database: its claims are deleted once,
		// the controller deleting each again while it waits; the case's
		// stale instance deletes data-db-0's next incarnation too, and its
		// claims come back, so the end states match. Another writer's
		// deletion (a fault's) does not count.
		claim := func(at time.Duration, user, verb, name string) Request {
			return Request{At: t0.Add(at), User: user, Verb: verb, Resource: "persistentvolumeclaims", Namespace: "kp-7", Name: name, Code: 200}
		}
		recreated := []Request{
			claim(1*s, "operator", "delete", "data-db-0"), claim(1*s, "operator", "delete", "data-db-1"),
			claim(2*s, "operator", "delete", "data-db-0"), // still held by its pod
			claim(4*s, "kcm", "create", "data-db-0"), claim(4*s, "kcm", "create", "data-db-1"),
			claim(5*s, "kubeprop-user", "delete", "data-db-1"), claim(6*s, "kcm", "create", "data-db-1"),
		}
		tr := referenceTrace(20*s, nil, 0)
		tr.Start, tr.Controller, tr.Reference.Trace.Controller = t0, "operator", "operator"
		tr.Reference.Trace.Requests = recreated[:5]
		tr.Requests = recreated
		v := p.Check(tr)
		require.NoError(t, v.Err, v.Detail)
		stale := claim(7*s, "operator", "delete", "data-db-0")
		// data-db-7 the reference never had (its StatefulSet never saw
		// the replicas that make it): not a claim it kept.
		tr.Requests = append(slices.Clone(recreated), stale, claim(7*s, "operator", "delete", "data-db-7"),
			claim(7*s, "operator", "delete", "data-db-1"), claim(8*s, "kcm", "create", "data-db-0"))
		tr.Requests[len(tr.Requests)-2].Code = 404 // refused: no claim lost
		tr.Healed = time.Time{}                    // decided while the faults still run
		v = p.Check(tr)
		require.True(t, v.Done)
		require.EqualError(t, v.Err, "matches-reference: the controller deleted more claims than in the reference run: PersistentVolumeClaim data-db-0 (2, the reference 1)")
		require.Contains(t, v.Detail, "data-db-0 at 1s, data-db-0 at 7s")

		// The reference's Database was deleted before its claims were
		// made (its setup settled early): it had none to reclaim when the
		// user change came, so the case's reclaiming them is no loss.
		tr = referenceTrace(20*s, nil, 0)
		tr.Start, tr.Controller, tr.Reference.Trace.Controller = t0, "operator", "operator"
		recreate := Event{At: t0.Add(s / 2), Kind: UserEvent, Name: "Recreate{Object: 0}"}
		tr.Events, tr.Reference.Trace.Events = []Event{recreate}, []Event{recreate}
		withClaims := tr.Reference.Trace.States[0]
		noClaims := State{At: t0, Objects: slices.DeleteFunc(slices.Clone(withClaims.Objects), func(o *unstructured.Unstructured) bool {
			return o.GetKind() == "PersistentVolumeClaim"
		})}
		withClaims.At = t0.Add(3 * s)
		tr.Reference.Trace.States = []State{noClaims, withClaims}
		tr.Reference.Trace.Requests = recreated[3:5] // made after the re-create, never deleted
		tr.Requests = recreated[:5]
		v = p.Check(tr)
		require.NoError(t, v.Err, v.Detail)
		// Nor when the claims it had then were being deleted (the
		// Database re-created again before the claims its last re-create
		// deleted were made anew, its step settled early under load).
		deleting := State{At: t0, Objects: make([]*unstructured.Unstructured, len(withClaims.Objects))}
		for i, o := range withClaims.Objects {
			deleting.Objects[i] = o
			if o.GetKind() == "PersistentVolumeClaim" {
				deleting.Objects[i] = o.DeepCopy()
				deleting.Objects[i].SetDeletionTimestamp(&metav1.Time{Time: t0})
			}
		}
		tr.Reference.Trace.States = []State{deleting, withClaims}
		v = p.Check(tr)
		require.NoError(t, v.Err, v.Detail)
		// Had it the claims then, the same deletions are a loss.
		withClaims.At = t0
		tr.Reference.Trace.States = []State{withClaims}
		v = p.Check(tr)
		require.ErrorContains(t, v.Err, "the controller deleted more claims than in the reference run: PersistentVolumeClaim data-db-0 (1, the reference 0)")
	})
	t.Run("field paths", func(t *testing.T) {
		require.Equal(t, []string{"metadata", "labels", "app.kubernetes.io/name"}, splitField("metadata.labels[app.kubernetes.io/name]"))
		require.Equal(t, []string{"spec", "containers", "image"}, splitField("spec.containers.image"))
		var paths []string
		fieldDifferences("", map[string]any{"c": []any{map[string]any{"type": "Ready", "status": "True"}}, "a.b": int64(1)},
			map[string]any{"c": []any{map[string]any{"type": "Ready", "status": "False"}}, "a.b": int64(2)}, &paths)
		require.Equal(t, []string{"[a.b]", "c[type=Ready].status"}, paths)
	})
}

// TestClusterAddressesInValues: an IP the cluster gave a pod, a node or a
// Service, alone or inside a longer value, is named by what holds it; a
// pod's of an earlier state as one gone; any other stays.
func TestClusterAddressesInValues(t *testing.T) {
	pod := func(name, ip string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"kind": "Pod",
			"metadata": map[string]any{"name": name, "generateName": "head-"},
			"status":   map[string]any{"podIP": ip, "podIPs": []any{map[string]any{"ip": ip}, map[string]any{"ip": "fd00::2"}}, "hostIP": "127.0.0.5"}}}
	}
	svc := &unstructured.Unstructured{Object: map[string]any{"kind": "Service", "metadata": map[string]any{"name": "head-svc"},
		"spec": map[string]any{"clusterIP": "10.0.0.7", "clusterIPs": []any{"10.0.0.7"}}}}
	headless := &unstructured.Unstructured{Object: map[string]any{"kind": "Service", "metadata": map[string]any{"name": "db"},
		"spec": map[string]any{"clusterIP": "None"}}}
	now := State{Objects: []*unstructured.Unstructured{pod("head-bcdfg", "198.18.1.2"), svc, headless}}
	earlier := State{Objects: []*unstructured.Unstructured{pod("head-hjklm", "198.18.1.9")}}
	norm := normalizer{names: namesOf(now, seenIn([]State{earlier, now}))}
	for value, want := range map[string]string{
		"198.18.1.2":               "<IP of Pod head-*>",
		"fd00::2":                  "<IP of Pod head-*>",
		"198.18.1.2:6379":          "<IP of Pod head-*>:6379",
		"http://10.0.0.7:8265/api": "http://<cluster IP of Service head-svc>:8265/api",
		"127.0.0.5":                "<IP of a node>",
		"198.18.1.9":               "<IP of a pod gone>",
		"198.18.1.2,198.18.1.9.":   "<IP of Pod head-*>,<IP of a pod gone>.",
		"198.18.1.25":              "198.18.1.25",
		"10.1.2.3":                 "10.1.2.3",
		"version 1.2.3":            "version 1.2.3",
		"None":                     "None",
		"198.18.1.2.4":             "198.18.1.2.4",
	} {
		require.Equal(t, want, norm.value(value), "%q", value)
	}
}

// TestTimesInValues: a time inside a longer value (a condition's message)
// is left out, as RFC 3339 and Go's time.Time.String write it.
func TestTimesInValues(t *testing.T) {
	norm := normalizer{names: namesOf(State{}, seenIn())}
	at := time.Date(2026, 12, 7, 14, 20, 21, 123456789, time.UTC)
	for value, want := range map[string]string{
		at.Format(time.RFC3339):                                       "<time>",
		"ready since " + at.Format(time.RFC3339Nano):                  "ready since <time>",
		"ready since " + at.Format("2006-01-02T15:04:05-07:00") + ".": "ready since <time>.",
		"last sync " + at.String() + ", 3 pods":                       "last sync <time>, 3 pods",
		"last sync " + time.Now().String():                            "last sync <time>",
		"at " + at.In(time.FixedZone("", 19800)).String():             "at <time>",
		"version 2026-12-07":                                          "version 2026-12-07",
		"at 14:20:21":                                                 "at 14:20:21",
	} {
		require.Equal(t, want, norm.value(value), "%q", value)
	}
}

// TestGeneratedNamesInValues: a generated name inside a longer value is
// its generateName and a star, for a generateName of any state of either
// run (the pods an annotation lists may all be gone by the end); a longer
// name or another prefix is not one.
func TestGeneratedNamesInValues(t *testing.T) {
	norm := normalizer{names: namesOf(State{}, seenIn(nil, []State{{Objects: []*unstructured.Unstructured{
		{Object: map[string]any{"kind": "Pod", "metadata": map[string]any{"name": "web-bcdfg", "generateName": "web-"}}}}}}))}
	require.Equal(t, "web-*,web-*", norm.value("web-bcdfg,web-hjklm"))
	require.Equal(t, "pods: web-*", norm.value("pods: web-xz245"))
	require.Equal(t, "myweb-bcdfg", norm.value("myweb-bcdfg"))
	require.Equal(t, "web-bcdfgh", norm.value("web-bcdfgh"))
	require.Equal(t, "web-aaaaa", norm.value("web-aaaaa"), "not the API server's characters")
}
