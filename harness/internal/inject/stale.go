package inject

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A stale view is what a controller instance gets from an API server whose
// watch cache lags behind the cluster (an HA cluster with a lagging
// member: Sieve's stale state). Such a server answers lists at
// resourceVersion 0 (an informer's first list) or "not older than" a
// version from its cache, at the revision the cache has reached, and its
// watches deliver the events after that revision as it catches up. The
// instance is served so: its lists that accept any version not older than
// the stale one are answered at exactly that resource version (from etcd,
// which keeps every revision since its last compaction), its watch events
// are held until the view's end, and its watch-lists (sendInitialEvents)
// are refused as an API server without the WatchList feature refuses them,
// so that its informers fall back to a list. Consistent reads (a list at
// resourceVersion "", a get) are answered fresh, as a current API server
// answers them from etcd or waits for its cache to catch up; so are writes,
// whose preconditions and resource versions then meet the fresh state.

// staleView is an instance's stale view of the cluster.
type staleView struct {
	mu    sync.Mutex
	rv    uint64    // the resource version lists are answered at
	until time.Time // when the view ends; zero once ended
	told  func(string)
}

// ServeStale serves the instance the cluster as it was at resource version
// rv until until (see staleView); told hears when the view had to be
// served newer than asked.
func (inst *Instance) ServeStale(rv uint64, until time.Time, told func(string)) {
	inst.stale.mu.Lock()
	defer inst.stale.mu.Unlock()
	inst.stale.rv, inst.stale.until, inst.stale.told = rv, until, told
}

// endStale ends the instance's stale view: its held watch events are
// delivered.
func (inst *Instance) endStale() {
	inst.stale.mu.Lock()
	inst.stale.until = time.Time{}
	inst.stale.mu.Unlock()
}

// staleNow returns the resource version of the instance's stale view and
// when it ends, or ok false when it has none now.
func (inst *Instance) staleNow() (rv uint64, until time.Time, ok bool) {
	inst.stale.mu.Lock()
	defer inst.stale.mu.Unlock()
	if inst.stale.until.IsZero() || !time.Now().Before(inst.stale.until) {
		return 0, time.Time{}, false
	}
	return inst.stale.rv, inst.stale.until, true
}

// heldUntil is when the instance's watch events received before it may
// be delivered: the end of its stale view, or zero.
func (inst *Instance) heldUntil() time.Time {
	_, until, _ := inst.staleNow()
	return until
}

// serveStale answers a request of an instance with a stale view, when the
// view decides its answer: handled is false for a request served as
// usual.
func (inst *Instance) serveStale(rt http.RoundTripper, req *http.Request, rv uint64) (resp *http.Response, handled bool, err error) {
	info, err := requestInfos.NewRequestInfo(req)
	if err != nil || !info.IsResourceRequest {
		return nil, false, nil
	}
	q := req.URL.Query()
	switch {
	case info.Verb == "watch" && q.Get("sendInitialEvents") == "true":
		return statusResponse(req, metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid,
			Message: "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"}), true, nil
	case info.Verb != "list" || q.Get("continue") != "" || q.Get("resourceVersionMatch") == string(metav1.ResourceVersionMatchExact):
		return nil, false, nil
	}
	switch asked := q.Get("resourceVersion"); asked {
	case "": // a consistent read
		return nil, false, nil
	case "0":
	default:
		if n, err := strconv.ParseUint(asked, 10, 64); err != nil || n > rv {
			return nil, false, nil
		}
	}
	resp, err = rt.RoundTrip(listAt(req, rv))
	if err != nil || resp.StatusCode != http.StatusGone {
		return resp, true, err
	}
	// Compacted away: the oldest view the server still has.
	_ = resp.Body.Close()
	oldest, err := oldestServed(rt, req, rv)
	if err != nil {
		return nil, true, fmt.Errorf("the stale view at resource version %d is compacted, and finding the oldest one served failed: %w", rv, err)
	}
	inst.stale.mu.Lock()
	if inst.stale.rv < oldest {
		inst.stale.rv = oldest
		if inst.stale.told != nil {
			inst.stale.told(fmt.Sprintf("the stale view at resource version %d is older than the API server's compaction window: served the oldest it has, resource version %d", rv, oldest))
		}
	}
	inst.stale.mu.Unlock()
	resp, err = rt.RoundTrip(listAt(req, oldest))
	return resp, true, err
}

// listAt is the list request answered at exactly resource version rv.
func listAt(req *http.Request, rv uint64) *http.Request {
	out := req.Clone(req.Context())
	q := out.URL.Query()
	q.Set("resourceVersion", strconv.FormatUint(rv, 10))
	q.Set("resourceVersionMatch", string(metav1.ResourceVersionMatchExact))
	out.URL.RawQuery = q.Encode()
	return out
}

// oldestServed finds, by bisection, the oldest resource version after rv
// at which the API server still answers req's list: between rv (gone)
// and the current one.
func oldestServed(rt http.RoundTripper, req *http.Request, rv uint64) (uint64, error) {
	probe := func(at string) (uint64, int, error) {
		p := req.Clone(req.Context())
		q := p.URL.Query()
		q.Del("resourceVersionMatch")
		q.Set("limit", "1")
		q.Set("resourceVersion", at)
		if at != "" {
			q.Set("resourceVersionMatch", string(metav1.ResourceVersionMatchExact))
		}
		p.URL.RawQuery = q.Encode()
		p.Header.Set("Accept", "application/json")
		resp, err := rt.RoundTrip(p)
		if err != nil {
			return 0, 0, err
		}
		defer resp.Body.Close()
		var list metav1.List
		if resp.StatusCode != http.StatusOK {
			return 0, resp.StatusCode, nil
		}
		if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
			return 0, 0, fmt.Errorf("reading a list: %w", err)
		}
		n, err := strconv.ParseUint(list.ResourceVersion, 10, 64)
		return n, resp.StatusCode, err
	}
	hi, code, err := probe("")
	if err != nil {
		return 0, err
	}
	if code != http.StatusOK {
		return 0, fmt.Errorf("the current list was answered %d", code)
	}
	lo := rv // answered 410
	for hi > lo+1 {
		mid := lo + (hi-lo)/2
		_, code, err := probe(strconv.FormatUint(mid, 10))
		switch {
		case err != nil:
			return 0, err
		case code == http.StatusGone:
			lo = mid
		case code == http.StatusOK:
			hi = mid
		default:
			return 0, fmt.Errorf("a list at resource version %d was answered %d", mid, code)
		}
	}
	return hi, nil
}
