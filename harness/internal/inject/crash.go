package inject

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeprop/kubeprop/faults"
)

// CrashAfter arms the crash after the writes-th write that match names;
// named is told which write that was, by its verb, resource and rank
// among writes of both since now.
func (f *Faults) CrashAfter(match faults.WriteMatch, writes int, named func(faults.CrashAfterWriteStep)) {
	f.mu.Lock()
	f.crashLeft, f.crashMatch, f.crashSeen, f.crashNamed = writes, match, map[string]int{}, named
	f.mu.Unlock()
}

// wrote counts a write that went through (resource with its
// subresource: "podsets/status"); it reports whether the controller dies
// of it. Writes in the case's namespace count: an unnamed crash counts the
// aimed ones only (leases and Events are renewed all the time, and a crash
// after one is no crash between two writes of the controller's own); a
// crash named by its resource counts that resource's writes, a lease's
// too.
func (f *Faults) wrote(verb, namespace string, gr schema.GroupResource, sub string) bool {
	resource := withSubresource(gr.Resource, sub)
	aimed := f.aimed(namespace, gr)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.crashLeft == 0 || namespace != f.opts.Namespace || !aimed && f.crashMatch.Resource == "" {
		return false
	}
	f.crashSeen[verb+" "+resource]++
	if !f.crashMatch.Matches(verb, resource) {
		return false
	}
	f.crashLeft--
	if f.crashLeft > 0 {
		return false
	}
	if f.crashNamed != nil {
		f.crashNamed(faults.CrashAfterWriteStep{Verb: verb, Resource: resource, Writes: f.crashSeen[verb+" "+resource]})
	}
	return true
}

// withSubresource is how a CrashAfterWrite names a resource.
func withSubresource(resource, sub string) string {
	if sub == "" {
		return resource
	}
	return resource + "/" + sub
}
