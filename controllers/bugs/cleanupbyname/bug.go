package cleanupbyname

import (
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/kubeprop/kubeprop/controllers/database"
)

// New returns the flawed reconciler.
func New() *database.Reconciler {
	return &database.Reconciler{Flaws: database.Flaws{
		// The bug: by name, from the cache, with no precondition.
		Cleanup: func(ctx context.Context, r *database.Reconciler, db *database.Database) (bool, error) {
			sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: db.Namespace, Name: db.Name}}
			if err := r.Client.Delete(ctx, sts, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
				return false, fmt.Errorf("deleting StatefulSet %s: %w", db.Name, err)
			}
			var claims corev1.PersistentVolumeClaimList
			if err := r.Client.List(ctx, &claims, client.InNamespace(db.Namespace), client.MatchingLabels{database.LabelInstance: db.Name}); err != nil {
				return false, fmt.Errorf("listing the claims of Database %s: %w", db.Name, err)
			}
			for _, c := range claims.Items {
				claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name}}
				if err := r.Client.Delete(ctx, claim); err != nil && !apierrors.IsNotFound(err) {
					return false, fmt.Errorf("deleting claim %s: %w", c.Name, err)
				}
			}
			return len(claims.Items) == 0, nil
		},
		// And the finalizer stripped from whatever Database has the name.
		Release: func(ctx context.Context, r *database.Reconciler, db *database.Database) error {
			controllerutil.RemoveFinalizer(db, database.Finalizer)
			patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": db.Finalizers}})
			if err != nil {
				return err
			}
			target := &database.Database{ObjectMeta: metav1.ObjectMeta{Namespace: db.Namespace, Name: db.Name}}
			if err := r.Client.Patch(ctx, target, client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("removing the finalizer of Database %s: %w", db.Name, err)
			}
			return nil
		},
	}}
}
