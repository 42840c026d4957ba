package twostepcreate

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeprop/kubeprop/controllers/podset"
)

// annotation lists the PodSet's pods, comma-separated.
const annotation = "apps.kubeprop.dev/pods"

// New returns the flawed reconciler.
func New() *podset.Reconciler {
	return &podset.Reconciler{Flaws: podset.Flaws{
		ListPods: func(ctx context.Context, r *podset.Reconciler, ps *podset.PodSet) ([]corev1.Pod, error) {
			// The annotation is read fresh, as the correct controller lists
			// its pods: a cached PodSet that has not seen the last record
			// would lose pods without any crash, a second bug that makes
			// the first one's plans fail at random.
			var fresh podset.PodSet
			if err := r.Reader.Get(ctx, client.ObjectKeyFromObject(ps), &fresh); err != nil {
				return nil, fmt.Errorf("reading PodSet %s: %w", ps.Name, err)
			}
			if ps.Annotations == nil {
				ps.Annotations = map[string]string{}
			}
			ps.Annotations[annotation] = fresh.Annotations[annotation]
			var out []corev1.Pod
			for _, name := range strings.Split(ps.Annotations[annotation], ",") {
				if name == "" {
					continue
				}
				var pod corev1.Pod
				err := r.Reader.Get(ctx, types.NamespacedName{Namespace: ps.Namespace, Name: name}, &pod)
				switch {
				case apierrors.IsNotFound(err):
				case err != nil:
					return nil, err
				default:
					out = append(out, pod)
				}
			}
			return out, nil
		},
		// The bug: the second write of two; a crash before it loses the pod.
		Created: func(ctx context.Context, r *podset.Reconciler, ps *podset.PodSet, pod *corev1.Pod) error {
			names := ps.Annotations[annotation]
			if names != "" {
				names += ","
			}
			names += pod.Name
			if ps.Annotations == nil {
				ps.Annotations = map[string]string{}
			}
			ps.Annotations[annotation] = names
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{annotation: names}}})
			if err := r.Client.Patch(ctx, ps.DeepCopy(), client.RawPatch(types.MergePatchType, patch)); err != nil {
				return fmt.Errorf("recording pod %s: %w", pod.Name, err)
			}
			return nil
		},
	}}
}
