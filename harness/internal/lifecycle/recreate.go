package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubeprop/kubeprop/faults"
)

// recreateWaits is how many settle caps a Recreate waits for the old
// object to be gone: its finalizers may hold it (a controller's clean-up),
// but one that nobody removes would hold it forever.
const recreateWaits = 3

// desiredStates keeps the user's desired state of each fixture: as the
// Spec gave it, with the user's changes (ScaleChange, UserChange: patches
// through the user's client) applied as they succeed. A Recreate creates
// the fixture again from it, as a user would from their manifest, not
// from what the controller or a conflicting writer made of the object.
type desiredStates struct {
	objects [][]byte // JSON, by fixture index
}

// trackUserChanges wraps the user's client so that its patches of a fixture
// update the fixture's desired state.
func (c *caseRun) trackUserChanges(cl client.WithWatch) client.WithWatch {
	return interceptor.NewClient(cl, interceptor.Funcs{
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			data, err := patch.Data(obj)
			if err != nil {
				return err
			}
			if err := cl.Patch(ctx, obj, patch, opts...); err != nil {
				return err
			}
			c.userPatched(obj, patch.Type(), data)
			return nil
		},
	})
}

// keepDesired records the fixtures as the Spec gave them, before their
// creation.
func (c *caseRun) keepDesired(fixtures []client.Object) error {
	c.desired.objects = make([][]byte, len(fixtures))
	for i, f := range fixtures {
		b, err := json.Marshal(f)
		if err != nil {
			return fmt.Errorf("fixture %s: %w", f.GetName(), err)
		}
		c.desired.objects[i] = b
	}
	return nil
}

// userPatched applies a patch of the user's to the desired state of the
// fixture it patched, if it patched one.
func (c *caseRun) userPatched(obj client.Object, pt types.PatchType, data []byte) {
	i := c.fixtureIndex(obj)
	if i < 0 {
		return
	}
	var next []byte
	var err error
	switch pt {
	case types.MergePatchType:
		next, err = jsonpatch.MergePatch(c.desired.objects[i], data)
	case types.JSONPatchType:
		var p jsonpatch.Patch
		if p, err = jsonpatch.DecodePatch(addFields(data)); err == nil {
			next, err = p.Apply(c.desired.objects[i])
		}
	default:
		err = fmt.Errorf("a %s patch is not followed", pt)
	}
	if err != nil {
		c.logf("the desired state of %s does not follow the user's change (%v): a Recreate creates it without that change", obj.GetName(), err)
		return
	}
	c.desired.objects[i] = next
}

// addFields is a JSON patch whose replaces of a field are adds: on the
// server the field was there (the API server defaulted it) where the
// user's manifest may lack it. A replace of a list item stays.
func addFields(data []byte) []byte {
	var ops []map[string]any
	if json.Unmarshal(data, &ops) != nil {
		return data
	}
	for _, op := range ops {
		path, _ := op["path"].(string)
		last := path[strings.LastIndex(path, "/")+1:]
		if _, err := strconv.Atoi(last); op["op"] == "replace" && err != nil {
			op["op"] = "add"
		}
	}
	out, err := json.Marshal(ops)
	if err != nil {
		return data
	}
	return out
}

// fixtureIndex is the index of the fixture obj is, by kind and name; -1
// when it is none.
func (c *caseRun) fixtureIndex(obj client.Object) int {
	gvk, err := apiutil.GVKForObject(obj, c.spec.Scheme)
	if err != nil {
		return -1
	}
	for i, f := range c.fixtures {
		if fg, err := apiutil.GVKForObject(f, c.spec.Scheme); err == nil && fg.GroupKind() == gvk.GroupKind() && f.GetName() == obj.GetName() {
			return i
		}
	}
	return -1
}

// RecreateFixture deletes the i-th fixture, waits until its name is free
// (its finalizers done), settles if asked, and creates it again from the
// user's desired state: a new object, with a new UID. One still being
// deleted after recreateWaits settle caps (a fault refusing the
// controller's finalizer removal) is created again once the faults heal,
// as a user waits for the name (finishRecreates): the reference run made
// that change, and without it the case would end with no object at all.
// The user changes after it wait for it (caseRun.waiting).
func (c *caseRun) RecreateFixture(ctx context.Context, i int, settle bool) error {
	old := c.fixtures[i]
	if err := c.userClient.Delete(ctx, old.DeepCopyObject().(client.Object)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("Recreate: deleting %s: %w", old.GetName(), err)
	}
	gone, err := c.awaitGone(ctx, old)
	switch {
	case err != nil:
		return err
	case !gone:
		// Not a no-op: the deletion was asked for, and the shrinker
		// drops no-ops as steps that changed nothing.
		c.unmade = append(c.unmade, i)
		return nil
	}
	if settle {
		if err := c.Settle(ctx); err != nil {
			return err
		}
	}
	// Made now, whatever an earlier Recreate of it left to make.
	c.unmade = slices.DeleteFunc(c.unmade, func(j int) bool { return j == i })
	return c.createAgain(ctx, i)
}

// awaitGone waits, up to recreateWaits settle caps, until old's name is
// free; false (and a line in the timeline) when it is still being
// deleted then.
func (c *caseRun) awaitGone(ctx context.Context, old client.Object) (bool, error) {
	var finalizers []string
	limit := recreateWaits * c.spec.SettleCap
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, limit, true, func(ctx context.Context) (bool, error) {
		current := old.DeepCopyObject().(client.Object)
		err := c.userClient.Get(ctx, client.ObjectKeyFromObject(old), current)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		finalizers = current.GetFinalizers()
		return false, nil
	})
	switch {
	case ctx.Err() != nil:
		return false, ctx.Err()
	case err != nil:
		c.logf("Recreate: %s was still being deleted %v after its deletion (finalizers %v): not created again yet", old.GetName(), limit, finalizers)
		return false, nil
	}
	return true, nil
}

// finishUserChanges makes, once the faults healed, what the user had
// left to do: the Recreates not done (finishRecreates), then the user
// changes that came after one (caseRun.waiting), in order. Those left
// when a property fails for good are not run.
func (c *caseRun) finishUserChanges(ctx context.Context, plan []faults.Step) error {
	for {
		if err := c.finishRecreates(ctx); err != nil {
			return err
		}
		if len(c.waiting) == 0 {
			return nil
		}
		i := c.waiting[0]
		c.waiting = c.waiting[1:]
		decided, err := c.applyStep(ctx, i, plan[i])
		if err != nil || decided {
			return err
		}
	}
}

// finishRecreates creates again, once the faults healed, the fixtures a
// Recreate could not: each once its name is free. One that stays held
// (a finalizer that no one removes, faults or not) is left so.
func (c *caseRun) finishRecreates(ctx context.Context) error {
	for _, i := range c.unmade {
		gone, err := c.awaitGone(ctx, c.fixtures[i])
		if err != nil {
			return err
		}
		if !gone {
			continue
		}
		if err := c.createAgain(ctx, i); err != nil {
			return err
		}
		c.logf("Recreate: %s created again after the heal", c.fixtures[i].GetName())
	}
	c.unmade = nil
	return nil
}

// createAgain creates the i-th fixture from the user's desired state.
func (c *caseRun) createAgain(ctx context.Context, i int) error {
	old := c.fixtures[i]
	obj, err := c.desiredObject(i, old)
	if err != nil {
		return fmt.Errorf("Recreate: %w", err)
	}
	obj.SetNamespace(c.namespace)
	if err := c.userClient.Create(ctx, obj); err != nil {
		return fmt.Errorf("Recreate: creating %s again: %w", old.GetName(), err)
	}
	c.fixtures[i] = obj
	return nil
}

// desiredObject is the i-th fixture's desired state as an object of
// old's type (unstructured for a fixture given so).
func (c *caseRun) desiredObject(i int, old client.Object) (client.Object, error) {
	gvk, err := apiutil.GVKForObject(old, c.spec.Scheme)
	if err != nil {
		return nil, err
	}
	var obj client.Object = &unstructured.Unstructured{}
	if _, isUnstructured := old.(*unstructured.Unstructured); !isUnstructured {
		o, err := c.spec.Scheme.New(gvk)
		if err != nil {
			return nil, err
		}
		typed, ok := o.(client.Object)
		if !ok {
			return nil, fmt.Errorf("%s is not an object", gvk)
		}
		obj = typed
	}
	if err := json.Unmarshal(c.desired.objects[i], obj); err != nil {
		return nil, fmt.Errorf("the desired state of %s: %w", old.GetName(), err)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj, nil
}
