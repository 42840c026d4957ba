package record

import (
	"context"
	"fmt"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// CatchUp returns once the recorder has seen every change its watches
// will bring up to now: each watched resource is listed, and the wait
// lasts until every listed object has been seen at its resource version
// or a newer one (deleted, maybe), and every object seen that the list no
// longer holds (and that is not newer than the list) has been seen
// deleted. Each resource
// has its own watch stream, and on a loaded machine one can lag another by
// more than any quiet period: a state built before the lagging changes
// arrived may never have existed (a PodSet's status that counts its pods
// as deleted, before their deletions), and a verdict on it would be the
// machine's, not the controller's.
func (r *Recorder) CatchUp(ctx context.Context) error {
	if r.client == nil {
		return nil
	}
	type listed struct {
		resource string
		rv       uint64
		items    map[string]uint64 // by objectKey
	}
	lists := make([]listed, 0, len(r.watched))
	for _, gvr := range r.watched {
		list, err := r.client.Resource(gvr).Namespace(r.namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing %s to catch the trace up: %w", gvr.Resource, err)
		}
		l := listed{resource: gvr.Resource, rv: resourceVersion(list.GetResourceVersion()), items: map[string]uint64{}}
		for i := range list.Items {
			l.items[objectKey(&list.Items[i])] = resourceVersion(list.Items[i].GetResourceVersion())
		}
		lists = append(lists, l)
	}
	var behind string // what the watches had not brought at the last look
	caughtUp := func(context.Context) (bool, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, l := range lists {
			for key, rv := range l.items {
				// Seen at the list's version or later (deleted since, too).
				if seen := r.seen[key]; seen < rv {
					behind = fmt.Sprintf("%s seen at %d, listed at %d", key, seen, rv)
					return false, nil
				}
			}
			for key, seen := range r.objects {
				_, listedToo := l.items[key]
				if !listedToo && r.resources[seen.GetKind()] == l.resource && resourceVersion(seen.GetResourceVersion()) <= l.rv {
					behind = fmt.Sprintf("%s seen at %s, not in the list at %d", key, seen.GetResourceVersion(), l.rv)
					return false, nil // its deletion is on its way
				}
			}
		}
		return true, nil
	}
	if err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, caughtUp); err != nil {
		return fmt.Errorf("waiting for the watches to bring the changes up to a fresh list (%s): %w", behind, err)
	}
	return nil
}

func resourceVersion(s string) uint64 {
	rv, _ := strconv.ParseUint(s, 10, 64)
	return rv
}
