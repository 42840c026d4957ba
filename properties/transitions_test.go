package properties

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestTransitions: a check of two successive states holds on a trace
// whose ready count never drops, fails at the first drop naming it, and
// judged again on a longer trace of the same case checks only the new
// changes.
func TestTransitions(t *testing.T) {
	checked := 0
	ready := func(st State) int64 {
		got, _, _ := unstructured.NestedInt64(st.Get("App", "web").Object, "status", "readyReplicas")
		return got
	}
	p := Transitions("never-drops", func(prev, next State) error {
		checked++
		if ready(next) < ready(prev) {
			return fmt.Errorf("App web's ready replicas dropped from %d to %d", ready(prev), ready(next))
		}
		return nil
	})
	memo := &Memo{}
	states := replicaStates(1, 2, 2, 3, 1)

	v := p.Check(&Trace{Start: t0, States: states[:3], Memo: memo})
	require.False(t, v.Done)
	require.NoError(t, v.Err)
	require.Equal(t, 2, checked, "three states, two changes")

	v = p.Check(&Trace{Start: t0, States: states[:4], Memo: memo, Final: true})
	require.True(t, v.Done)
	require.NoError(t, v.Err)
	require.Equal(t, 3, checked, "only the new change is checked")

	v = p.Check(&Trace{Start: t0, States: states, Memo: memo})
	require.True(t, v.Done, "a violation is final at once")
	require.EqualError(t, v.Err, "never-drops: violated: App web's ready replicas dropped from 3 to 1")
	require.Equal(t, "from the state at 3s to the one at 4s after the start", v.Detail)

	// One state has no change to judge.
	v = p.Check(&Trace{Start: t0, States: states[:1], Final: true})
	require.True(t, v.Done)
	require.NoError(t, v.Err)
}
