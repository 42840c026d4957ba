package faults

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"pgregory.net/rapid"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestPlansRoundTrip(t *testing.T) {
	cfg := Config{Nodes: 3, Fixtures: 2}
	rapid.Check(t, func(rt *rapid.T) {
		plan := Plan(Catalog(), cfg, 7).Draw(rt, "plan")
		require.NotEmpty(rt, plan)
		require.LessOrEqual(rt, len(plan), 7)
		for _, s := range plan {
			if n, ok := s.(NodeLossStep); ok {
				require.Less(rt, n.Node, cfg.Nodes)
			}
			m, err := EncodeStep(s)
			require.NoError(rt, err)
			back, err := DecodeStep(m, Catalog())
			require.NoError(rt, err)
			require.Equal(rt, s, back, "comparable values survive a scenario file")
		}
	})
}

func TestFormat(t *testing.T) {
	require.Equal(t, "NodeLoss{Node: 1}", Format(NodeLossStep{Node: 1}))
	require.Equal(t, "ControllerRestart{}", Format(ControllerRestartStep{}))
	require.Equal(t, "[ConflictingWriter{Object: 0, Field: spec.replicas, Value: 2, Rounds: 20} NodeRecover{Node: 0}]",
		FormatPlan([]Step{ConflictingWriterStep{Field: "spec.replicas", Value: 2, Rounds: 20}, NodeRecoverStep{}}))
	require.True(t, IsUserChange(ScaleChangeStep{}))
	require.False(t, IsUserChange(NodeLossStep{}))
}

func TestDecodeErrors(t *testing.T) {
	_, err := DecodeStep(map[string]any{"fault": "NodeExplode", "node": 1}, Catalog())
	require.EqualError(t, err, `unknown fault "NodeExplode"; the known faults are APIErrors, Burst, ChildDelete, ConflictingWriter, ContainerKill, ControllerRestart, CrashAfterWrite, CrashLoop, LivenessFailure, NodeLoss, NodeRecover, ReadinessFlap, Recreate, ScaleChange, StaleWatch, VolumeGrowth`)
	_, err = DecodeStep(map[string]any{"node": 1}, Catalog())
	require.ErrorContains(t, err, "no fault name")
	_, err = DecodeStep(map[string]any{"fault": "NodeLoss", "nodes": 1}, Catalog())
	require.ErrorContains(t, err, `unknown field "nodes"`)
	_, err = DecodeStep(map[string]any{"fault": "NodeLoss", "node": "one"}, Catalog())
	require.ErrorContains(t, err, "reading a NodeLoss step")
}

// fakeTarget records what steps ask of a case.
type fakeTarget struct {
	user     client.Client // the user's writes go there
	pods     []corev1.Pod
	calls    []string
	lost     map[int]bool
	fixtures []client.Object
}

func (f *fakeTarget) Namespace() string                          { return "ns" }
func (f *fakeTarget) Client() client.Client                      { return nil }
func (f *fakeTarget) UserClient() client.Client                  { return f.user }
func (f *fakeTarget) Fixtures() []client.Object                  { return f.fixtures }
func (f *fakeTarget) Settle(context.Context) error               { return nil }
func (f *fakeTarget) Pods(context.Context) ([]corev1.Pod, error) { return f.pods, nil }
func (f *fakeTarget) Children(context.Context) ([]client.Object, error) {
	return nil, nil
}
func (f *fakeTarget) LoseNode(_ context.Context, i int) error {
	if f.lost[i] {
		return noOp("node %d already lost", i)
	}
	f.lost[i] = true
	f.calls = append(f.calls, fmt.Sprintf("lose %d", i))
	return nil
}
func (f *fakeTarget) RecoverNode(i int) error {
	f.calls = append(f.calls, fmt.Sprintf("recover %d", i))
	return nil
}
func (f *fakeTarget) KillContainer(_ context.Context, pod, container string, code int32, reason string) error {
	f.calls = append(f.calls, fmt.Sprintf("kill %s/%s %d %s", pod, container, code, reason))
	return nil
}
func (f *fakeTarget) CrashLoop(_ context.Context, pod, container string, starts int, code int32) error {
	f.calls = append(f.calls, fmt.Sprintf("crash-loop %s/%s %d %d", pod, container, starts, code))
	return nil
}
func (f *fakeTarget) SetReady(_ context.Context, pod, container string, ready bool) error {
	f.calls = append(f.calls, fmt.Sprintf("ready %s/%s %v", pod, container, ready))
	return nil
}
func (f *fakeTarget) FailLiveness(_ context.Context, pod, container string, window time.Duration) error {
	f.calls = append(f.calls, fmt.Sprintf("liveness %s/%s %v", pod, container, window))
	return nil
}
func (f *fakeTarget) RestartController(_ context.Context, stale time.Duration) error {
	f.calls = append(f.calls, strings.TrimSpace(fmt.Sprintf("restart %v", map[bool]any{true: stale, false: ""}[stale > 0])))
	return nil
}
func (f *fakeTarget) SinceLastStep() time.Duration { return 4 * time.Second }
func (f *fakeTarget) RecreateFixture(_ context.Context, i int, settle bool) error {
	f.calls = append(f.calls, fmt.Sprintf("recreate %d settle %v", i, settle))
	return nil
}
func (f *fakeTarget) FailWrites(e APIError, m WriteMatch, requests int, window time.Duration) error {
	f.calls = append(f.calls, strings.TrimSpace(fmt.Sprintf("fail writes %s %d %v %s %s", e, requests, window, m.Verb, m.Resource)))
	return nil
}
func (f *fakeTarget) NameStep(s Step) { f.calls = append(f.calls, "named "+Format(s)) }
func (f *fakeTarget) CrashAfterWrites(m WriteMatch, writes int) error {
	f.calls = append(f.calls, strings.TrimSpace(fmt.Sprintf("crash after %d %s %s", writes, m.Verb, m.Resource)))
	return nil
}
func (f *fakeTarget) DelayWatches(resource string, delay, window time.Duration) error {
	f.calls = append(f.calls, strings.TrimSpace(fmt.Sprintf("delay watches %v for %v %s", delay, window, resource)))
	return nil
}
func (f *fakeTarget) DropWatches(resource string) error {
	f.calls = append(f.calls, strings.TrimSpace("drop watches "+resource))
	return nil
}

func TestApplyNamesByIndex(t *testing.T) {
	ctx := context.Background()
	pod := func(name string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}
	}
	f := &fakeTarget{lost: map[int]bool{}, pods: []corev1.Pod{pod("a"), pod("b")}}
	for _, s := range []Step{
		NodeLossStep{Node: 1}, ContainerKillStep{Pod: 3, ExitCode: 137}, ContainerKillStep{Pod: 0, ExitCode: 1},
		ControllerRestartStep{}, NodeRecoverStep{Node: 1},
		CrashLoopStep{Pod: 1, Starts: 3, ExitCode: 2}, ReadinessFlapStep{Pod: 2},
		APIErrorsStep{Error: Conflict, Requests: 3}, APIErrorsStep{Error: Timeout, ForMs: 1500},
		APIErrorsStep{Error: Conflict, Requests: 2, Verb: "update", Resource: "podsets/status"},
		CrashAfterWriteStep{Writes: 2}, CrashAfterWriteStep{}, CrashAfterWriteStep{Verb: "create", Resource: "pods", Writes: 1}, StaleWatchStep{DelayMs: 500, ForMs: 2000}, StaleWatchStep{Drop: true},
	} {
		require.NoError(t, s.Apply(ctx, f), Format(s))
	}
	require.Equal(t, []string{"lose 1", "kill b/app 137 OOMKilled", "kill a/app 1 Error", "restart", "recover 1",
		"crash-loop b/app 3 2", "ready a/app false", "ready a/app true",
		"fail writes Conflict 3 0s", "fail writes Timeout 0 1.5s", "fail writes Conflict 2 0s update podsets/status", "crash after 2", "crash after 1", "crash after 1 create pods",
		"delay watches 500ms for 2s", "drop watches"}, f.calls)

	// Steps that no longer apply are no-ops, not failures.
	require.True(t, errors.Is(NodeLossStep{Node: 1}.Apply(ctx, &fakeTarget{lost: map[int]bool{1: true}}), ErrNoOp))
	require.True(t, errors.Is(ContainerKillStep{}.Apply(ctx, &fakeTarget{}), ErrNoOp))
	require.True(t, errors.Is(ChildDeleteStep{}.Apply(ctx, &fakeTarget{}), ErrNoOp))
	require.True(t, errors.Is(CrashLoopStep{}.Apply(ctx, &fakeTarget{}), ErrNoOp))
	require.True(t, errors.Is(ReadinessFlapStep{}.Apply(ctx, &fakeTarget{}), ErrNoOp))
	require.True(t, errors.Is(ScaleChangeStep{}.Apply(ctx, &fakeTarget{}), ErrNoOp))
	require.True(t, errors.Is(ConflictingWriterStep{}.Apply(ctx, &fakeTarget{}), ErrNoOp))
	require.True(t, errors.Is(APIErrorsStep{Error: Conflict}.Apply(ctx, &fakeTarget{}), ErrNoOp))
	require.True(t, errors.Is(LivenessFailureStep{Pod: 1, ForMs: 500}.Apply(ctx, f), ErrNoOp), "no liveness probe")

	// A liveness failure acts on the pod's first container with a probe.
	probed := pod("c")
	probed.Spec.Containers = append(probed.Spec.Containers, corev1.Container{Name: "db", LivenessProbe: &corev1.Probe{}})
	g := &fakeTarget{pods: []corev1.Pod{probed}}
	require.NoError(t, LivenessFailureStep{Pod: 4, ForMs: 2500}.Apply(ctx, g))
	require.Equal(t, []string{"liveness c/db 2.5s"}, g.calls)
	require.True(t, errors.Is(StaleWatchStep{}.Apply(ctx, &fakeTarget{}), ErrNoOp))
	require.ErrorContains(t, APIErrorsStep{Error: "Teapot", Requests: 1}.Apply(ctx, &fakeTarget{}), `unknown error "Teapot"`)
}

func TestUserChange(t *testing.T) {
	images := rapid.Custom(func(t *rapid.T) map[string]any {
		return map[string]any{"spec": map[string]any{"image": rapid.SampledFrom([]string{"web:1", "web:2"}).Draw(t, "image")}}
	})
	f := UserChange("ImageChange", images)
	known := append(Catalog(), f)
	rapid.Check(t, func(rt *rapid.T) {
		s := f.Steps(Config{Fixtures: 2}).Draw(rt, "step")
		require.True(rt, IsUserChange(s))
		require.Equal(rt, "ImageChange", s.Fault())
		require.Regexp(rt, `^ImageChange\{Object: [01], Patch: \{"spec":\{"image":"web:[12]"\}\}\}$`, Format(s))
		m, err := EncodeStep(s)
		require.NoError(rt, err)
		require.NotContains(rt, m, "name")
		back, err := DecodeStep(m, known)
		require.NoError(rt, err)
		require.Equal(rt, s, back)
	})
	_, err := DecodeStep(map[string]any{"fault": "ImageChange", "object": 0, "patch": "{not json"}, known)
	require.ErrorContains(t, err, "is not JSON")
	require.True(t, errors.Is(UserChangeStep{Name: "ImageChange", Patch: "{}"}.Apply(context.Background(), &fakeTarget{}), ErrNoOp))
}

// TestSimpler: the shrinker's value pass tries the crash after the first
// write and a single conflicting write; other steps have no simpler form.
func TestSimpler(t *testing.T) {
	require.Equal(t, []Step{CrashAfterWriteStep{Writes: 1}}, Simpler(CrashAfterWriteStep{Writes: 3}))
	require.Equal(t, []Step{CrashAfterWriteStep{Verb: "create", Resource: "pods", Writes: 1}},
		Simpler(CrashAfterWriteStep{Verb: "create", Resource: "pods", Writes: 2}))
	require.Empty(t, Simpler(CrashAfterWriteStep{Writes: 1}))
	cw := ConflictingWriterStep{Field: "spec.replicas", Value: 7, Rounds: 4}
	one := cw
	one.Rounds = 1
	require.Equal(t, []Step{one}, Simpler(cw))
	require.Empty(t, Simpler(one))
	require.Empty(t, Simpler(ScaleChangeStep{Value: 5}))
}

// TestPlanDrawsEdgesAndSwarms: amounts are drawn at their edges and next
// to the fixture's own value far more often than uniform draws would (five
// rounds of a conflict, a scale to 0, to the maximum, to one more than the
// fixture's), and swarm plans repeat a fault more often than plans that
// draw every step from every fault.
func TestPlanDrawsEdgesAndSwarms(t *testing.T) {
	web := &unstructured.Unstructured{}
	web.SetUnstructuredContent(map[string]any{"apiVersion": "v1", "kind": "Widget",
		"metadata": map[string]any{"name": "web"}, "spec": map[string]any{"replicas": int64(3)}})
	cfg := Config{Nodes: 3, Fixtures: 1, Objects: []client.Object{web}}
	fs := Catalog()
	gens := make([]*rapid.Generator[Step], len(fs))
	for i, f := range fs {
		gens[i] = f.Steps(cfg)
	}
	const plans = 4000
	// repeats counts the plans in which a fault has two steps or more.
	repeats := func(gen *rapid.Generator[[]Step], each func(Step)) int {
		n := 0
		for seed := range plans {
			kinds := map[string]int{}
			for _, s := range gen.Example(seed) {
				kinds[s.Fault()]++
				each(s)
			}
			for _, k := range kinds {
				if k >= 2 {
					n++
					break
				}
			}
		}
		return n
	}
	rounds, scales := map[int]int{}, map[int64]int{}
	conflicts, scaleSteps := 0, 0
	swarm := repeats(Plan(fs, cfg, 5), func(s Step) {
		switch s := s.(type) {
		case ConflictingWriterStep:
			conflicts++
			rounds[s.Rounds]++
		case ScaleChangeStep:
			scaleSteps++
			scales[s.Value]++
		}
	})
	every := repeats(rapid.SliceOfN(rapid.OneOf(gens...), 1, 5), func(Step) {})
	share := func(n, of int) float64 { return float64(n) / float64(of) }
	t.Logf("rounds %v of %d, scale values %v of %d; plans repeating a fault: %d of %d (%d drawing from every fault)",
		rounds, conflicts, scales, scaleSteps, swarm, plans, every)
	// Uniform draws: 1/5 each; rapid's own favour 1.
	require.Greater(t, share(rounds[5], conflicts), 0.3, "conflicts of five rounds")
	// Uniform: 1/6 each, 1/3 a pair; with the edges, 5/24 each (rapid's
	// own draws, in the other half, favour the small values).
	for _, v := range []int64{0, 5, 2, 4} { // the ends, the fixture's 3 ± 1
		require.Greater(t, share(scales[v], scaleSteps), 1.0/6, "scales to %d", v)
	}
	require.Greater(t, share(scales[0]+scales[5], scaleSteps), 0.4, "scales to an end")
	require.Greater(t, share(scales[2]+scales[4], scaleSteps), 0.38, "scales next to the fixture's")
	require.Greater(t, share(swarm, every), 1.15, "swarm plans repeat a fault more often")

	// Of fewer faults, every plan draws from all of them: a bug that
	// needs both of two faults is not left out half the time.
	few := []*rapid.Generator[Step]{fs[0].Steps(cfg), fs[1].Steps(cfg)}
	for seed := range 100 {
		require.Equal(t, rapid.SliceOfN(rapid.OneOf(few...), 1, 5).Example(seed), Plan(fs[:2], cfg, 5).Example(seed))
	}
}

func TestIntField(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}},
		TerminationGracePeriodSeconds: func(n int64) *int64 { return &n }(30)}}
	v, ok := intField(pod, "spec.terminationGracePeriodSeconds")
	require.True(t, ok)
	require.Equal(t, int64(30), v)
	_, ok = intField(pod, "spec.containers[0].name")
	require.False(t, ok, "a string")
	_, ok = intField(pod, "spec.containers[3].name")
	require.False(t, ok, "past the list")
	_, ok = intField(pod, "spec.replicas")
	require.False(t, ok, "unset")
}

func TestArmedBeforeAction(t *testing.T) {
	conflict := APIErrorsStep{Error: Conflict, Requests: 3}
	crash := CrashAfterWriteStep{Writes: 1}
	scale := ScaleChangeStep{Field: "spec.replicas", Value: 0}
	loss := NodeLossStep{Node: 1}
	for _, c := range []struct{ in, want []Step }{
		{[]Step{scale, conflict}, []Step{conflict, scale}},
		{[]Step{loss, scale, conflict, crash}, []Step{loss, conflict, crash, scale}},
		{[]Step{conflict, scale}, []Step{conflict, scale}},
		{[]Step{conflict, crash}, []Step{conflict, crash}},
		{[]Step{scale, conflict, loss}, []Step{scale, conflict, loss}},
	} {
		require.Equal(t, FormatPlan(c.want), FormatPlan(ArmedBeforeAction(c.in)), "from %s", FormatPlan(c.in))
	}

	// Every drawn plan that has a step other than an armed one ends with
	// such a step: no armed step is healed before anything happens.
	fs := []Fault{APIErrors(), ScaleChange(ScaleOptions{})}
	for seed := range 500 {
		plan := Plan(fs, Config{Nodes: 3, Fixtures: 1}, 5).Example(seed)
		actions := 0
		for _, s := range plan {
			if !IsArmed(s) {
				actions++
			}
		}
		if actions > 0 {
			require.False(t, IsArmed(plan[len(plan)-1]), "seed %d: %s", seed, FormatPlan(plan))
		}
	}
}

func TestVolumeGrowth(t *testing.T) {
	ctx := context.Background()
	claim := func(name, size string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}},
			Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	}
	pending := claim("data-web-2", "1Gi")
	pending.Status.Phase = corev1.ClaimPending
	user := fake.NewClientBuilder().WithObjects(claim("data-web-1", "1Gi"), claim("data-web-0", "512Mi"), pending).Build()
	f := &fakeTarget{user: user}
	// Claims by name, bound or not (the same plan grows the same claim in
	// every run): 4 modulo 3 is the second, data-web-1.
	require.NoError(t, VolumeGrowthStep{Claim: 4, ByGi: 2}.Apply(ctx, f))
	require.NoError(t, VolumeGrowthStep{Claim: 0, ByGi: 1}.Apply(ctx, f))
	// Each names the claim it grew; a named step grows that one, whatever
	// its index says.
	require.Equal(t, []string{"named VolumeGrowth{Claim: 4, ByGi: 2, Name: data-web-1}", "named VolumeGrowth{Claim: 0, ByGi: 1, Name: data-web-0}"}, f.calls)
	require.NoError(t, VolumeGrowthStep{Claim: 0, ByGi: 1, Name: "data-web-1"}.Apply(ctx, f))
	require.Len(t, f.calls, 2, "named already")
	// The third is pending: the step waits for it to bind, then gives up.
	defer func(wait time.Duration) { claimBindWait = wait }(claimBindWait)
	claimBindWait = 200 * time.Millisecond
	err := VolumeGrowthStep{Claim: 2, ByGi: 1}.Apply(ctx, f)
	require.True(t, errors.Is(err, ErrNoOp), "not bound: %v", err)
	require.ErrorContains(t, err, "claim data-web-2 is not there and bound")
	err = VolumeGrowthStep{ByGi: 1, Name: "data-web-9"}.Apply(ctx, f)
	require.True(t, errors.Is(err, ErrNoOp), "no such claim: %v", err)
	var got corev1.PersistentVolumeClaim
	require.NoError(t, user.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "data-web-1"}, &got))
	require.Equal(t, "4Gi", ptr.To(got.Spec.Resources.Requests[corev1.ResourceStorage]).String())
	require.NoError(t, user.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "data-web-0"}, &got))
	require.Equal(t, "1536Mi", ptr.To(got.Spec.Resources.Requests[corev1.ResourceStorage]).String())

	require.True(t, errors.Is(VolumeGrowthStep{ByGi: 1}.Apply(ctx, &fakeTarget{user: fake.NewClientBuilder().Build()}), ErrNoOp), "no claim")
	require.True(t, errors.Is(VolumeGrowthStep{}.Apply(ctx, f), ErrNoOp), "no growth")
	require.Equal(t, []Step{VolumeGrowthStep{Claim: 3, ByGi: 1, Name: "data-db-0"}}, Simpler(VolumeGrowthStep{Claim: 3, ByGi: 7, Name: "data-db-0"}))
	require.True(t, IsUserChange(VolumeGrowthStep{}))
}

// TestMergedScaleChanges: a ScaleChange dropped while the next of its
// field keeps the change it made, from the value before the dropped one.
func TestMergedScaleChanges(t *testing.T) {
	scale := func(object int, v int64) ScaleChangeStep {
		return ScaleChangeStep{Object: object, Field: "spec.replicas", Value: v}
	}
	app := func(replicas int64) client.Object {
		return &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicas": replicas}}}
	}
	crash := CrashAfterWriteStep{Writes: 1}
	objects := []client.Object{app(3), app(1)}

	// A scale-up by one: from 3, to 4.
	require.Equal(t, [][]Step{{crash, scale(0, 4)}},
		MergedScaleChanges([]Step{scale(0, 0), crash, scale(0, 1)}, objects))
	// Each ScaleChange with the next of its own fixture (the other
	// fixture's change stays): 3 → 5 → 1 merged is 3 → 0, for a scale-down
	// by four stops at 0; 5 → 1 → 0 merged is 5 → 4.
	require.Equal(t, [][]Step{
		{scale(1, 2), scale(0, 0), scale(0, 0)},
		{scale(0, 5), scale(1, 2), scale(0, 4)},
	}, MergedScaleChanges([]Step{scale(0, 5), scale(1, 2), scale(0, 1), scale(0, 0)}, objects))
	// A ScaleChange to the value the field had changes nothing: dropping it
	// is the plain drop. Without the fixtures, the first change's start is
	// unknown, the second's is the first's value.
	require.Empty(t, MergedScaleChanges([]Step{scale(0, 3), scale(0, 1)}, objects))
	require.Equal(t, [][]Step{{scale(0, 5), scale(0, 3)}},
		MergedScaleChanges([]Step{scale(0, 5), scale(0, 2), scale(0, 0)}, nil))
	// Nothing to merge into.
	require.Empty(t, MergedScaleChanges([]Step{scale(0, 5), crash}, objects))
}
