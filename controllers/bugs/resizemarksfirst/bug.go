package resizemarksfirst

import (
	"context"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubeprop/kubeprop/controllers/database"
)

// New returns the flawed reconciler.
func New() *database.Reconciler {
	return &database.Reconciler{Flaws: database.Flaws{
		// The bug: the record first, and the record, not the template,
		// decides.
		Grow: func(ctx context.Context, r *database.Reconciler, db *database.Database, _, _ resource.Quantity) (bool, error) {
			if db.Status.Storage == db.Spec.Storage {
				return false, nil
			}
			err := r.UpdateStatus(ctx, db, func(s *database.DatabaseStatus) { s.Storage = db.Spec.Storage })
			return err == nil, err
		},
	}}
}
