package lifecycle

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeprop/kubeprop/harness/internal/inject"
	"github.com/kubeprop/kubeprop/harness/internal/record"
)

// TestQueuePendingThroughShortBackOff: an item backing off for less than
// the settle's quiet period keeps the controller busy until it is taken
// again, however late the machine takes it; a longer back-off, or a
// RequeueAfter, leaves the controller idle meanwhile.
func TestQueuePendingThroughShortBackOff(t *testing.T) {
	item := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "web"}}
	for _, tc := range []struct {
		name      string
		backOff   time.Duration
		requeue   func(q *recordingQueue)
		pending   bool
		takenBack bool
	}{
		{name: "short back-off", backOff: 100 * time.Millisecond, requeue: func(q *recordingQueue) { q.AddRateLimited(item) }, pending: true, takenBack: true},
		{name: "long back-off", backOff: 2 * time.Second, requeue: func(q *recordingQueue) { q.AddRateLimited(item) }},
		{name: "requeue after", backOff: 100 * time.Millisecond, requeue: func(q *recordingQueue) { q.AddAfter(item, 100*time.Millisecond) }, takenBack: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := record.New(record.Options{})
			limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](tc.backOff, tc.backOff)
			q := newRecordingQueue(rec, &inject.Instance{}, "widget", limiter, 500*time.Millisecond)
			defer q.ShutDown()
			q.Add(item)
			got, _ := q.Get()
			q.Forget(got)
			tc.requeue(q)
			q.Done(got)
			require.Equal(t, tc.pending, q.Pending(), "while it waits")
			require.Equal(t, tc.pending, !rec.Idle())
			if !tc.takenBack {
				return
			}
			got, _ = q.Get()
			require.Equal(t, item, got)
			q.Done(got)
			require.False(t, q.Pending(), "taken again")
			require.True(t, rec.Idle())
		})
	}
}
