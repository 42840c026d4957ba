package inject

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeprop/kubeprop/faults"
)

// FailWrites answers the controller's writes in the case's namespace
// that match with e: the next requests of them, or, when requests is 0,
// all for window.
func (f *Faults) FailWrites(e faults.APIError, match faults.WriteMatch, requests int, window time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failErr, f.failMatch, f.failLeft, f.failUntil = e, match, requests, time.Time{}
	if requests <= 0 {
		f.failUntil = time.Now().Add(window)
	}
}

// refusal returns the error to answer a write with, or nil to let it
// through. A conflict answers only writes that can meet one (mayConflict,
// asked only then: an update, or a patch that states the resourceVersion it read or is a
// server-side apply): a plain merge patch never conflicts, and a 409 to
// one with a uid precondition says the object was replaced, which a
// correct controller rightly takes as "gone" and waits for the new
// object's events that an injected error never brings; writes
// outside the case's namespace go through, and so do lease renewals and
// Events (see aimed): refusing a leader's renewals for seconds would end
// its leadership, and a correct operator exits then.
func (f *Faults) refusal(verb, namespace string, gr schema.GroupResource, sub, name string, mayConflict func() bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case namespace != f.opts.Namespace:
		if f.opts.IsCaseNamespace(namespace) {
			f.noteForeign(verb + " " + gr.Resource + " in " + namespace)
		}
		return nil
	case !f.aimed(namespace, gr), !f.failMatch.Matches(verb, withSubresource(gr.Resource, sub)):
		return nil
	case f.failErr == faults.Conflict && !mayConflict():
		return nil
	case f.failLeft > 0:
		f.failLeft--
	case time.Now().Before(f.failUntil):
	default:
		return nil
	}
	switch f.failErr {
	case faults.Conflict:
		return apierrors.NewConflict(gr, name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	case faults.TooManyRequests:
		return apierrors.NewTooManyRequests("the server has received too many requests and has asked us to try again later", 1)
	case faults.Timeout:
		return apierrors.NewTimeoutError("request did not complete within the allowed duration", 1)
	default:
		return apierrors.NewInternalError(errors.New("an error injected by kubeprop"))
	}
}

// maxForeign bounds the foreign writes a case lists: a few name the
// problem.
const maxForeign = 10

// noteForeign records a write into another case's namespace; f.mu held.
func (f *Faults) noteForeign(write string) {
	if len(f.foreign) < maxForeign && !slices.Contains(f.foreign, write) {
		f.foreign = append(f.foreign, write)
	}
}

// ForeignWrites are the controller's writes seen in other cases'
// namespaces, "verb resource in namespace", each once, the first few.
func (f *Faults) ForeignWrites() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.foreign)
}

// aimed reports whether a write is of the controller's own kinds or
// their children, where a crash matters: in the case's namespace, and
// neither a lease renewal (leader election) nor an Event.
func (f *Faults) aimed(namespace string, gr schema.GroupResource) bool {
	switch {
	case namespace != f.opts.Namespace:
		return false
	case gr.Resource == "leases" && gr.Group == "coordination.k8s.io", gr.Resource == "events" && (gr.Group == "" || gr.Group == "events.k8s.io"):
		return false
	}
	return true
}

// always and never answer whether a write may meet a conflict, for the
// writes whose kind decides.
func always() bool { return true }
func never() bool  { return false }

// lockedPatch reports whether a patch can meet a conflict: a server-side
// apply, or a patch whose body states a resourceVersion (controller-
// runtime's MergeFromWithOptimisticLock).
func lockedPatch(obj client.Object, patch client.Patch) bool {
	if patch.Type() == types.ApplyPatchType {
		return true
	}
	body, err := patch.Data(obj)
	return err == nil && statesResourceVersion(body)
}

// lockedPatchRequest is lockedPatch for a PATCH request; its body is
// read and put back.
func lockedPatchRequest(req *http.Request) bool {
	if strings.HasPrefix(req.Header.Get("Content-Type"), string(types.ApplyPatchType)) {
		return true
	}
	if req.Body == nil || req.Body == http.NoBody {
		return false
	}
	body, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	req.Body = io.NopCloser(bytes.NewReader(body))
	return err == nil && statesResourceVersion(body)
}

// statesResourceVersion reports whether a patch body sets or tests
// metadata.resourceVersion: a merge or strategic patch's field, or a JSON
// patch's operation on its path.
func statesResourceVersion(body []byte) bool {
	var merge struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if json.Unmarshal(body, &merge) == nil {
		return merge.Metadata.ResourceVersion != ""
	}
	var ops []jsonPatchOp
	return json.Unmarshal(body, &ops) == nil && slices.ContainsFunc(ops, func(op jsonPatchOp) bool {
		return op.Path == "/metadata/resourceVersion"
	})
}

// jsonPatchOp is the part of a JSON patch operation statesResourceVersion
// reads.
type jsonPatchOp struct {
	Path string `json:"path"`
}
