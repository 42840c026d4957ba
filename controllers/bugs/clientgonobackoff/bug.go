package clientgonobackoff

import (
	"k8s.io/client-go/util/workqueue"

	"github.com/kubeprop/kubeprop/controllers/clientgopodset"
)

// Options returns the flawed controller's options.
func Options() clientgopodset.Options {
	return clientgopodset.Options{
		// The bug: no back-off.
		Retry: func(q workqueue.TypedRateLimitingInterface[string], key string) { q.Add(key) },
	}
}
