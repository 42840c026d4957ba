package observedafter

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeprop/kubeprop/controllers/database"
)

// rollout bounds the wait for the StatefulSet to take a change.
const rollout = 3 * time.Second

// New returns the flawed reconciler.
func New() *database.Reconciler {
	return &database.Reconciler{Flaws: database.Flaws{
		// Spec work only for a generation not observed yet, as the API
		// server has it ("to avoid acting on a stale cache").
		SyncSpec: func(ctx context.Context, r *database.Reconciler, db *database.Database) (bool, error) {
			fresh, err := read(ctx, r, db)
			if err != nil {
				return false, err
			}
			return fresh.Status.ObservedGeneration != fresh.Generation, nil
		},
		// The bug: it waits for the StatefulSet to roll the change out,
		// then reports the generation of a copy read after that, which
		// may be newer than the one acted on.
		ObservedGeneration: func(ctx context.Context, r *database.Reconciler, db *database.Database) (int64, error) {
			_ = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, rollout, true, func(ctx context.Context) (bool, error) {
				var set appsv1.StatefulSet
				if err := r.Reader.Get(ctx, client.ObjectKeyFromObject(db), &set); err != nil {
					return false, nil
				}
				return set.Status.ObservedGeneration >= set.Generation && set.Status.ReadyReplicas == ptr.Deref(set.Spec.Replicas, 1), nil
			})
			fresh, err := read(ctx, r, db)
			if err != nil {
				return 0, err
			}
			return fresh.Generation, nil
		},
	}}
}

// read reads the Database fresh from the API server.
func read(ctx context.Context, r *database.Reconciler, db *database.Database) (*database.Database, error) {
	var fresh database.Database
	if err := r.Reader.Get(ctx, client.ObjectKeyFromObject(db), &fresh); err != nil {
		return nil, fmt.Errorf("reading Database %s: %w", db.Name, err)
	}
	return &fresh, nil
}
