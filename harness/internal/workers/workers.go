// Package workers runs the loop of the controllers the harness itself
// runs (the kubelet simulator, the storage provisioner): informers whose
// caches are filled first, then a workqueue drained by a few goroutines
// until the context ends.
package workers

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/informers"
)

// SyncTimeout bounds the informers' first lists.
const SyncTimeout = 30 * time.Second

// Start starts factory's informers and waits, at most SyncTimeout, until
// their caches are filled; then it runs n goroutines of process, each
// until process returns false, and once ctx ends shuts queue and factory
// down. The goroutines count in wg. name begins the error.
func Start(ctx context.Context, name string, factory informers.SharedInformerFactory, queue interface{ ShutDown() },
	n int, process func(context.Context) bool, wg *sync.WaitGroup) error {
	factory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, SyncTimeout)
	defer cancel()
	for typ, ok := range factory.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			factory.Shutdown()
			return fmt.Errorf("%s: listing %v from the API server did not finish within %v; is the API server up?", name, typ, SyncTimeout)
		}
	}
	for range n {
		wg.Go(func() {
			for process(ctx) {
			}
		})
	}
	wg.Go(func() {
		<-ctx.Done()
		queue.ShutDown()
		factory.Shutdown()
	})
	return nil
}
