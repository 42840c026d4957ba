package inject

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/kubeprop/kubeprop/properties"
)

// WrapTransport serves the reads of a controller instance's connections:
// its watch streams (its informers') delayed or cut by the watch faults,
// its reads answered from a stale view while it has one (ServeStale).
func (f *Faults) WrapTransport(inst *Instance) func(http.RoundTripper) http.RoundTripper {
	f.mu.Lock()
	f.instances[inst] = true
	f.mu.Unlock()
	return func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if rv, _, stale := inst.staleNow(); stale {
				if resp, handled, err := inst.serveStale(rt, req, rv); handled {
					return resp, err
				}
			}
			resp, err := rt.RoundTrip(req)
			if err == nil && resp.StatusCode < 300 {
				f.noteAct(req)
			}
			if err != nil || req.URL.Query().Get("watch") == "" || req.URL.Query().Get("watch") == "false" {
				return resp, err
			}
			resp.Body = f.delayed(resp.Body, inst, watchedResource(req))
			return resp, nil
		})
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// WrapWrites injects the write faults (API errors, the crash after a
// write) at the HTTP level, for controllers whose client the harness does
// not build: Func's and Process's. inst is the controller instance the
// connection is for.
func (f *Faults) WrapWrites(inst *Instance) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if inst.Dead.Load() {
				return nil, ErrCrashed
			}
			info, ok := writeOf(req)
			if !ok {
				return rt.RoundTrip(req)
			}
			verb, gr, ns, name, sub := info.Verb, schema.GroupResource{Group: info.APIGroup, Resource: info.Resource}, info.Namespace, info.Name, info.Subresource
			mayConflict := func() bool { return verb == "update" || verb == "patch" && lockedPatchRequest(req) }
			if err := f.refusal(verb, ns, gr, sub, name, mayConflict); err != nil {
				var status apierrors.APIStatus
				errors.As(err, &status) // every refusal is an API status
				f.opts.Refused(properties.Request{
					At: time.Now(), UserAgent: UserAgentInjected,
					Verb: verb, Resource: gr.Resource, Subresource: sub, Name: name, Code: int(status.Status().Code),
				})
				return statusResponse(req, status.Status()), nil
			}
			resp, err := rt.RoundTrip(req)
			if err == nil && resp.StatusCode < 300 && f.wrote(verb, ns, gr, sub) {
				inst.Dead.Store(true)
				if inst.Kill != nil {
					inst.Kill()
				}
				f.opts.Crashed()
			}
			return resp, err
		})
	}
}

// requestInfos reads API request paths as the API server does.
var requestInfos = &apirequest.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")}

// writeOf reads a write request of an API resource as the API server
// does: its verb (create, update, patch, delete, deletecollection), group,
// resource, namespace, name and subresource; ok is false for a read or a
// request that is not of a resource. A namespace object's own namespace
// is left empty: writing a namespace is no write in it.
func writeOf(req *http.Request) (info *apirequest.RequestInfo, ok bool) {
	info, err := requestInfos.NewRequestInfo(req)
	if err != nil || !info.IsResourceRequest {
		return nil, false
	}
	switch info.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
	default:
		return nil, false
	}
	if info.Resource == "namespaces" {
		info.Namespace = ""
	}
	return info, true
}

// statusResponse is the API server's answer with an error status.
func statusResponse(req *http.Request, status metav1.Status) *http.Response {
	status.APIVersion, status.Kind = "v1", "Status"
	body, _ := json.Marshal(status)
	return &http.Response{
		StatusCode: int(status.Code), Status: fmt.Sprintf("%d %s", status.Code, http.StatusText(int(status.Code))),
		Header: http.Header{"Content-Type": []string{"application/json"}},
		Body:   io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)),
		Request: req, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
	}
}
