package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// NodeFilter decides which of the candidate nodes a pod of that namespace
// may be bound to: it returns those it keeps, a subset of nodes. Nil keeps
// every node.
type NodeFilter func(podNamespace string, nodes []string) []string

// The wire types of a kube-scheduler extender's filter call with
// nodeCacheCapable, as k8s.io/kube-scheduler/extender/v1 declares them
// (ExtenderArgs, ExtenderFilterResult). Those types have no JSON tags, so
// the fields travel under their Go names; declared here to keep
// k8s.io/kube-scheduler out of go.mod for two structs.
type extenderArgs struct {
	Pod *corev1.Pod
	// NodeNames are the candidates: only with nodeCacheCapable.
	NodeNames *[]string
}

type extenderFilterResult struct {
	// NodeNames are the nodes kept. The scheduler reads a nil list as no
	// node kept.
	NodeNames *[]string
	// FailedNodes may be freed by preemption; none of ours are.
	FailedNodes map[string]string `json:",omitempty"`
	// FailedAndUnresolvableNodes are the nodes filtered out: preemption
	// must not evict another namespace's pods to make room on them.
	FailedAndUnresolvableNodes map[string]string `json:",omitempty"`
	// Error fails this scheduling attempt; the pod is retried.
	Error string `json:",omitempty"`
}

// hostPriority is one node's score in a prioritize call's answer
// (k8s.io/kube-scheduler/extender/v1 HostPriority).
type hostPriority struct {
	Host  string
	Score int64
}

// NodePicker names, for a pod the scheduler places, the node it should
// go to among the candidates that passed every filter; "" leaves the
// choice to the scheduler.
type NodePicker func(pod *corev1.Pod, nodes []string) string

// The calls' paths under the extender's URL.
const (
	extenderVerb           = "filter"
	extenderPrioritizeVerb = "prioritize"
	// extenderWeight makes the picked node's score (10 × weight × 10)
	// outweigh every score plug-in of the scheduler together (each at most
	// 100 × its weight, about 1,200 in all).
	extenderWeight = 100
)

// extender is the scheduler extender the cluster serves on loopback, so
// that pods land only on the nodes NodeFilter allows them, without any
// change to the pods themselves.
type extender struct {
	server   *http.Server
	listener net.Listener
	done     chan struct{}
}

// startExtender serves the filter and prioritize calls on a free loopback
// port.
func startExtender(filter NodeFilter, pick NodePicker) (*extender, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("starting the scheduler extender: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/"+extenderVerb, filterHandler(filter))
	mux.Handle("/"+extenderPrioritizeVerb, prioritizeHandler(pick))
	e := &extender{
		server:   &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		listener: l,
		done:     make(chan struct{}),
	}
	go func() {
		defer close(e.done)
		_ = e.server.Serve(l) // ends with ErrServerClosed on stop
	}()
	return e, nil
}

// urlPrefix is the extender's address for the scheduler's configuration.
func (e *extender) urlPrefix() string {
	return "http://127.0.0.1:" + strconv.Itoa(e.listener.Addr().(*net.TCPAddr).Port) + "/"
}

// stop closes the listener and every connection; the scheduler is stopped
// first, so no call is lost that matters.
func (e *extender) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := e.server.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, e.server.Close())
	}
	<-e.done
	if err != nil {
		return fmt.Errorf("stopping the scheduler extender: %w", err)
	}
	return nil
}

// maxExtenderRequest bounds a filter call's body: a pod and the names of
// every node, far under it.
const maxExtenderRequest = 64 << 20

// filterHandler answers the scheduler's filter calls with filter's
// decision. Every call gets an answer (a bad one an answer with Error set),
// so that the scheduler never waits out its timeout: an unanswered call
// fails the pod's scheduling attempt only after it.
func filterHandler(filter NodeFilter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res := filterResult(w, r, filter)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(res)
	})
}

func filterResult(w http.ResponseWriter, r *http.Request, filter NodeFilter) (res extenderFilterResult) {
	defer func() {
		// A filter that panics fails the attempt, not the test binary.
		if p := recover(); p != nil {
			res = extenderFilterResult{Error: fmt.Sprintf("kubeprop scheduler extender: the node filter panicked: %v", p)}
		}
	}()
	if r.Method != http.MethodPost {
		return extenderFilterResult{Error: fmt.Sprintf("kubeprop scheduler extender: %s %s: the filter call is a POST", r.Method, r.URL.Path)}
	}
	var args extenderArgs
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxExtenderRequest)).Decode(&args); err != nil {
		return extenderFilterResult{Error: fmt.Sprintf("kubeprop scheduler extender: decoding the filter call: %v", err)}
	}
	if args.Pod == nil {
		return extenderFilterResult{Error: "kubeprop scheduler extender: the filter call names no pod"}
	}
	if args.NodeNames == nil {
		return extenderFilterResult{Error: "kubeprop scheduler extender: the filter call has no NodeNames: the extender must be configured nodeCacheCapable"}
	}
	candidates := *args.NodeNames
	kept := candidates
	if filter != nil {
		kept = filter(args.Pod.Namespace, candidates)
	}
	// Only candidates may be returned: the scheduler fails the attempt on
	// any other name.
	keep := make(map[string]bool, len(kept))
	for _, n := range kept {
		keep[n] = true
	}
	names := make([]string, 0, len(kept))
	failed := map[string]string{}
	// One message for all, so that the scheduler's event counts them
	// ("3 node(s) ...") instead of listing each.
	msg := fmt.Sprintf("node(s) not for pods of namespace %s (kubeprop NodeFilter)", args.Pod.Namespace)
	for _, n := range candidates {
		if keep[n] {
			names = append(names, n)
		} else {
			failed[n] = msg
		}
	}
	return extenderFilterResult{NodeNames: &names, FailedAndUnresolvableNodes: failed}
}

// prioritizeHandler answers the scheduler's prioritize calls: the node
// pick names scores 10, every other 0. A call it cannot read scores every
// node 0 (the scheduler alone decides).
func prioritizeHandler(pick NodePicker) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scores := []hostPriority{}
		var args extenderArgs
		if r.Method == http.MethodPost && json.NewDecoder(http.MaxBytesReader(w, r.Body, maxExtenderRequest)).Decode(&args) == nil &&
			args.Pod != nil && args.NodeNames != nil {
			picked := ""
			if pick != nil {
				picked = pick(args.Pod, *args.NodeNames)
			}
			for _, n := range *args.NodeNames {
				score := int64(0)
				if n == picked {
					score = 10
				}
				scores = append(scores, hostPriority{Host: n, Score: score})
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(scores)
	})
}
