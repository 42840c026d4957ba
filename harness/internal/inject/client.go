package inject

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubeprop/kubeprop/properties"
)

// Client wraps the client of one in-process controller instance
// (controller-runtime's client interceptor).
func (f *Faults) Client(inst *Instance, c client.WithWatch) client.WithWatch {
	write := func(verb, sub string, obj any, mayConflict func() bool, do func() error) error {
		if inst.Dead.Load() {
			return ErrCrashed
		}
		gr, ns, name := f.describe(obj)
		if err := f.refusal(verb, ns, gr, sub, name, mayConflict); err != nil {
			var status apierrors.APIStatus
			errors.As(err, &status) // every refusal is an API status
			code := int(status.Status().Code)
			f.opts.Refused(properties.Request{
				At: time.Now(), UserAgent: UserAgentInjected,
				Verb: verb, Resource: gr.Resource, Subresource: sub, Name: name, Code: code,
			})
			return err
		}
		err := do()
		if err == nil && f.wrote(verb, ns, gr, sub) {
			inst.Dead.Store(true)
			f.opts.Crashed()
		}
		return err
	}
	read := func(do func() error) error {
		if inst.Dead.Load() {
			return ErrCrashed
		}
		return do()
	}
	return interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			return read(func() error { return c.Get(ctx, key, obj, opts...) })
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			return read(func() error { return c.List(ctx, list, opts...) })
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return write("create", "", obj, never, func() error { return c.Create(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return write("update", "", obj, always, func() error { return c.Update(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return write("patch", "", obj, func() bool { return lockedPatch(obj, patch) }, func() error { return c.Patch(ctx, obj, patch, opts...) })
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			return write("patch", "", obj, always, func() error { return c.Apply(ctx, obj, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return write("delete", "", obj, never, func() error { return c.Delete(ctx, obj, opts...) })
		},
		DeleteAllOf: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteAllOfOption) error {
			return write("deletecollection", "", obj, never, func() error { return c.DeleteAllOf(ctx, obj, opts...) })
		},
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceCreateOption) error {
			return write("create", sub, obj, never, func() error { return c.SubResource(sub).Create(ctx, obj, subObj, opts...) })
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return write("update", sub, obj, always, func() error { return c.SubResource(sub).Update(ctx, obj, opts...) })
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			return write("patch", sub, obj, func() bool { return lockedPatch(obj, patch) }, func() error { return c.SubResource(sub).Patch(ctx, obj, patch, opts...) })
		},
		SubResourceApply: func(ctx context.Context, c client.Client, sub string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
			return write("patch", sub, obj, always, func() error { return c.SubResource(sub).Apply(ctx, obj, opts...) })
		},
	})
}

// describe names the resource and object a write is for.
func (f *Faults) describe(obj any) (gr schema.GroupResource, namespace, name string) {
	var gvk schema.GroupVersionKind
	switch o := obj.(type) {
	case client.Object:
		gvk, _ = apiutil.GVKForObject(o, f.opts.Scheme)
		namespace, name = o.GetNamespace(), o.GetName()
	default:
		// An apply configuration: its apiVersion, kind and metadata are
		// fields.
		if m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj); err == nil {
			u := unstructured.Unstructured{Object: m}
			gvk, namespace, name = u.GroupVersionKind(), u.GetNamespace(), u.GetName()
		}
	}
	if m, err := f.opts.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
		return m.Resource.GroupResource(), namespace, name
	}
	return schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, namespace, name
}
